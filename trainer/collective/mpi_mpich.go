//go:build mpich && !mpi

package collective

// MPIBuilt names the MPI library this binary was built against (MPICH, or
// an ABI-compatible MPI such as Intel MPI).
const MPIBuilt = "mpich"
