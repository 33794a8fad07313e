//go:build mpich && !mpi

package mpi

// Library names the MPI library this binary was built against (MPICH, or
// an ABI-compatible MPI such as Intel MPI).
const Library = "mpich"
