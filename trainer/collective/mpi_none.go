//go:build !mpi && !mpich

package collective

import "github.com/batchkit/batchkit/topology"

// MPIBuilt names the MPI library this binary was built against: "" here.
const MPIBuilt = ""

func newMPI(topology.Topology, topology.Getenv) (Backend, error) { return nil, ErrNoMPI }
