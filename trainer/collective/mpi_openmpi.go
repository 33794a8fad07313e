//go:build mpi && !mpich

package collective

// MPIBuilt names the MPI library this binary was built against.
const MPIBuilt = "openmpi"
