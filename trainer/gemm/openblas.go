//go:build openblas && !mkl

package gemm

// Debian's libopenblas-dev (apt-get install libopenblas-dev): its
// openblas.pc names the pthread variant's include and library directories;
// the library itself is found through ld.so's cache.

// #cgo pkg-config: openblas
import "C"

const openblasBuilt, mklBuilt = true, false
