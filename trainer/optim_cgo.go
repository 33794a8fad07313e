//go:build openblas || mkl

package trainer

// #cgo noescape bk_sgd_step
// #cgo nocallback bk_sgd_step
// #include "optim.h"
import "C"

import "unsafe"

// sgdStep is the SGD update in C (optim.c), in a cgo BLAS build; g is set
// to +0 in the same pass when zero asks.
func sgdStep(p, g, buf []float32, lr, momentum, weightDecay float32, zero bool) (finite bool) {
	if len(p) == 0 {
		return true
	}
	_, _ = g[len(p)-1], buf[len(p)-1] // the C loop reads len(p) of each
	return C.bk_sgd_step((*C.float)(unsafe.Pointer(unsafe.SliceData(p))), (*C.float)(unsafe.Pointer(unsafe.SliceData(g))),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(buf))), C.size_t(len(p)), C.float(lr), C.float(momentum), C.float(weightDecay), C.int(cbool(zero))) == 0
}

func cbool(b bool) int {
	if b {
		return 1
	}
	return 0
}
