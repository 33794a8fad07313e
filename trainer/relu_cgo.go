//go:build openblas || mkl

package trainer

// #cgo noescape bk_relu_forward
// #cgo nocallback bk_relu_forward
// #cgo noescape bk_relu_backward
// #cgo nocallback bk_relu_backward
// #include "relu.h"
import "C"

import "unsafe"

// reluForward is reluForwardGo in C (relu.c), in a cgo BLAS build.
func reluForward(z []float32) {
	if len(z) == 0 {
		return
	}
	C.bk_relu_forward((*C.float)(unsafe.Pointer(unsafe.SliceData(z))), C.size_t(len(z)))
}

// reluBackward is reluBackwardGo in C (relu.c), in a cgo BLAS build.
func reluBackward(da, a, gb []float32, n int) {
	out := len(gb)
	if n == 0 || out == 0 {
		clear(gb)
		return
	}
	_, _ = da[n*out-1], a[n*out-1] // the C loop reads n rows of out of each
	C.bk_relu_backward((*C.float)(unsafe.Pointer(unsafe.SliceData(da))), (*C.float)(unsafe.Pointer(unsafe.SliceData(a))),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(gb))), C.size_t(n), C.size_t(out))
}
