//go:build !openblas && !mkl

package trainer

// sgdStep is the SGD update: Go in a build without cgo BLAS.
func sgdStep(p, g, buf []float32, lr, momentum, weightDecay float32, mode sgdMode, f float32) (finite bool) {
	return sgdGo(p, g, buf, lr, momentum, weightDecay, mode, f)
}
