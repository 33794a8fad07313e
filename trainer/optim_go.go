//go:build !openblas && !mkl

package trainer

// sgdStep is the SGD update: Go in a build without cgo BLAS, then g set to
// +0 when zero asks, in a pass of its own (a memclr, no slower than the
// zeroing of gonum's beta-0 products that it replaces; fusing it into the
// loop would only slow the loop down).
func sgdStep(p, g, buf []float32, lr, momentum, weightDecay float32, zero bool) (finite bool) {
	finite = sgdGo(p, g, buf, lr, momentum, weightDecay)
	if zero {
		clear(g[:len(p)])
	}
	return finite
}
