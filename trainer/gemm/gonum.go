package gemm

import (
	"runtime"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// gonumImpl is gonum's pure-Go Sgemm, called directly (not through
// blas32.Use's process-wide choice). Its goroutines follow GOMAXPROCS, which
// is the program's to set: threads is not applied to it.
type gonumImpl struct{ gonum.Implementation }

func openGonum(int) (Impl, error) { return gonumImpl{}, nil }

func (gonumImpl) Name() string { return Gonum }

func (gonumImpl) Threads() int { return runtime.GOMAXPROCS(0) }

// Sgemm checks as the cgo libraries do, so every Impl panics alike.
func (g gonumImpl) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if err := checkArgs(tA, tB, m, n, k, a, lda, b, ldb, c, ldc); err != nil {
		panic(err)
	}
	g.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Default is gonum, the Impl a nil one stands for.
func Default() Impl { return gonumImpl{} }
