//go:build mpi && mpich

package mpi

import "github.com/batchkit/batchkit/trainer/collective/backend"
import "github.com/batchkit/batchkit/topology"

// Tags mpi and mpich select two different MPI libraries: one binary links
// exactly one. The line below fails compilation with that message; the rest
// of the file keeps it the only error.
var _ int = "build tags mpi and mpich are mutually exclusive: use -tags mpi (Open MPI) or -tags mpich (MPICH, Intel MPI)"

const Library = ""

func New(topology.Topology, topology.Getenv) (backend.Backend, error) { return nil, ErrNotBuilt }

func LibraryVersion() string { return "" }
