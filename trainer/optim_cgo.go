//go:build openblas || mkl

package trainer

// #cgo noescape bk_sgd_step
// #cgo nocallback bk_sgd_step
// #include "optim.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// The modes are optim.h's: an index out of range fails the build if not.
var (
	_ = [1]int{}[int(sgdPlain)-int(C.BK_SGD_PLAIN)]
	_ = [1]int{}[int(sgdMulClear)-int(C.BK_SGD_MUL_CLEAR)]
	_ = [1]int{}[int(sgdDivClear)-int(C.BK_SGD_DIV_CLEAR)]
)

// sgdStep is the SGD update in C (optim.c), in a cgo BLAS build.
func sgdStep(p, g, buf []float32, lr, momentum, weightDecay float32, mode sgdMode, f float32) (finite bool) {
	if len(p) == 0 {
		return true
	}
	_, _ = g[len(p)-1], buf[len(p)-1] // the C loop reads len(p) of each
	rc := C.bk_sgd_step((*C.float)(unsafe.Pointer(unsafe.SliceData(p))), (*C.float)(unsafe.Pointer(unsafe.SliceData(g))),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(buf))), C.size_t(len(p)), C.float(lr), C.float(momentum), C.float(weightDecay),
		C.int(mode), C.float(f))
	switch rc {
	case 0:
		return true
	case 1:
		return false
	}
	panic(fmt.Sprintf("trainer: bk_sgd_step refused mode %d", mode)) // the modes above are all it has
}
