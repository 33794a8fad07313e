//go:build (openblas || mkl) && !(openblas && mkl)

package gemm

// The cgo binding of shim.h: one cblas_sgemm and the thread calls. The
// library's flags are in openblas.go or mkl.go, its C in shim_openblas.c or
// shim_mkl.c.

/*
#cgo noescape bkgemm_sgemm
#cgo nocallback bkgemm_sgemm
#cgo nocallback bkgemm_set_threads
#cgo nocallback bkgemm_version
#include "shim.h"
*/
import "C"

import (
	"strconv"
	"strings"
	"unsafe"

	"gonum.org/v1/gonum/blas"
)

// cblas is the cgo library of this build (only one is).
type cblas struct {
	name    string
	threads int
}

func openCBLAS(name string) func(int) (Impl, error) {
	return func(threads int) (Impl, error) {
		var got C.int
		if code := C.bkgemm_set_threads(C.int(threads), &got); code != C.BKGEMM_OK {
			return nil, shimError(name, "set threads", code)
		}
		if int(got) != threads {
			return nil, &LibraryError{Name: name, Op: "set threads", Code: int(got),
				Msg: "asked for " + itoa(threads) + " threads, the library runs " + itoa(int(got))}
		}
		return cblas{name: name, threads: threads}, nil
	}
}

func (c cblas) Name() string { return c.name }

func (c cblas) Threads() int { return c.threads }

func (c cblas) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, cm []float32, ldc int) {
	if err := checkArgs(tA, tB, m, n, k, a, lda, b, ldb, cm, ldc); err != nil {
		panic(err)
	}
	if m == 0 || n == 0 {
		return
	}
	code := C.bkgemm_sgemm(transCode(tA), transCode(tB), C.longlong(m), C.longlong(n), C.longlong(k), C.float(alpha),
		ptr(a), C.longlong(lda), ptr(b), C.longlong(ldb), C.float(beta), ptr(cm), C.longlong(ldc), C.int(c.threads))
	if code != C.BKGEMM_OK {
		panic(shimError(c.name, "sgemm", code))
	}
}

func transCode(t blas.Transpose) C.int {
	if t == blas.NoTrans {
		return 0
	}
	return 1
}

func ptr(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }

func shimError(name, op string, code C.int) error {
	msg := map[C.int]string{C.BKGEMM_ERANGE: "dimension out of range", C.BKGEMM_ETRANS: "bad transpose",
		C.BKGEMM_ETHREADS: "thread count below 1"}[code]
	if msg == "" {
		msg = "unknown error"
	}
	return &LibraryError{Name: name, Op: op, Code: int(code), Msg: msg}
}

// cblasVersion is the loaded library's version text, one line.
func cblasVersion() string {
	var buf [256]C.char
	if C.bkgemm_version(&buf[0], C.int(len(buf))) != C.BKGEMM_OK {
		return ""
	}
	return strings.TrimSpace(C.GoString(&buf[0]))
}

func itoa(n int) string { return strconv.Itoa(n) }
