//go:build mpi && !mpich

package mpi

// Library names the MPI library this binary was built against.
const Library = "openmpi"
