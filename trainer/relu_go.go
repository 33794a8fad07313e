//go:build !openblas && !mkl

package trainer

// reluForward and reluBackward are Go's in a build without cgo BLAS.
func reluForward(z []float32)                 { reluForwardGo(z) }
func reluBackward(da, a, gb []float32, n int) { reluBackwardGo(da, a, gb, n) }
