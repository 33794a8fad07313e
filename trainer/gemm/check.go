package gemm

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
)

// ArgError: Sgemm's arguments do not describe matrices in the slices.
type ArgError struct{ Msg string }

func (e *ArgError) Error() string { return "gemm: " + e.Msg }

// checkArgs is gonum's checks, done before any cgo call so that no library
// reaches its own error handler (xerbla prints and carries on).
func checkArgs(tA, tB blas.Transpose, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) error {
	trans := func(t blas.Transpose) bool { return t == blas.Trans || t == blas.ConjTrans }
	switch {
	case !valid(tA) || !valid(tB):
		return &ArgError{"bad transpose"}
	case m < 0 || n < 0 || k < 0:
		return &ArgError{fmt.Sprintf("negative dimension m=%d n=%d k=%d", m, n, k)}
	}
	ar, ac := m, k
	if trans(tA) {
		ar, ac = k, m
	}
	br, bc := k, n
	if trans(tB) {
		br, bc = n, k
	}
	for _, mat := range []struct {
		name       string
		d          []float32
		rows, cols int
		ld         int
	}{{"A", a, ar, ac, lda}, {"B", b, br, bc, ldb}, {"C", c, m, n, ldc}} {
		if mat.ld < max(1, mat.cols) {
			return &ArgError{fmt.Sprintf("%s: leading dimension %d < %d columns", mat.name, mat.ld, mat.cols)}
		}
		if mat.rows > 0 && mat.cols > 0 && len(mat.d) < (mat.rows-1)*mat.ld+mat.cols {
			return &ArgError{fmt.Sprintf("%s: %d elements for %d×%d (ld %d)", mat.name, len(mat.d), mat.rows, mat.cols, mat.ld)}
		}
	}
	return nil
}

func valid(t blas.Transpose) bool {
	return t == blas.NoTrans || t == blas.Trans || t == blas.ConjTrans
}
