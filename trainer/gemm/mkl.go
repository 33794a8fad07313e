//go:build mkl && !openblas

package gemm

// oneMKL from the wheels of scripts/mkl-stack.sh at its default prefix; make
// build-blas puts BATCHKIT_MKL_PREFIX's directories in CGO_CPPFLAGS and
// CGO_LDFLAGS, which come first. libmkl_rt.so.3 is linked by its file name
// (the wheels have no libmkl_rt.so link) and found, with the libiomp5 it
// loads, through the binary's RPATH to the wheel's lib/.

// #cgo CPPFLAGS: -I/opt/batchkit/mkl/include
// #cgo LDFLAGS: -L/opt/batchkit/mkl/lib -l:libmkl_rt.so.3 -Wl,--disable-new-dtags -Wl,-rpath,/opt/batchkit/mkl/lib
import "C"

const openblasBuilt, mklBuilt = false, true
