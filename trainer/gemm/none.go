//go:build !openblas && !mkl

package gemm

import "errors"

// This build has gonum alone.
const openblasBuilt, mklBuilt = false, false

func openCBLAS(string) func(int) (Impl, error) {
	return func(int) (Impl, error) { return nil, errors.New("no cgo BLAS in this build") }
}

func cblasVersion() string { return "" }
