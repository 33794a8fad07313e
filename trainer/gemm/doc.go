// Package gemm is the trainer's matrix multiply: single-precision GEMM
// (C = alpha·op(A)·op(B) + beta·C, row-major) from one of a few libraries,
// one row each in libraries (gemm.go):
//
//   - gonum: pure Go (gonum's Sgemm), always built in; on at most the
//     rank's thread count of goroutines (gonum alone would use GOMAXPROCS).
//   - openblas: OpenBLAS through cgo, build tag openblas (Debian's
//     libopenblas-dev; make build-blas BLAS=openblas).
//   - mkl: oneMKL through cgo, build tag mkl (the mkl wheels of
//     scripts/mkl-wheels.txt; make build-blas BLAS=mkl).
//
// A binary has at most one of the cgo libraries (both export cblas_sgemm);
// Open picks a library by name at run time, so a binary built with one can
// still run gonum. The binding is a hand-written one of cblas_sgemm and the
// thread calls (shim.h), not gonum's netlib package: the trainer needs one
// BLAS function and per-call thread control, not all of BLAS.
//
// Nothing here changes the process behind its caller: gonum.org's blas32.Use
// is never called; an Impl is handed to whoever multiplies (trainer.MLP).
// OpenBLAS has only a process-wide thread count, which Open sets and
// documents; MKL's is set per call (mkl_set_num_threads_local), gonum's is
// the Impl's own.
package gemm
