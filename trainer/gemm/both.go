//go:build openblas && mkl

package gemm

import "errors"

// Tags openblas and mkl select two libraries that both define cblas_sgemm:
// one binary links exactly one. The line below fails compilation with that
// message; the rest of the file keeps it the only error.
var _ int = "build tags openblas and mkl are mutually exclusive: use -tags openblas or -tags mkl"

const openblasBuilt, mklBuilt = false, false

func openCBLAS(string) func(int) (Impl, error) {
	return func(int) (Impl, error) { return nil, errors.New("no cgo BLAS in this build") }
}

func cblasVersion() string { return "" }
