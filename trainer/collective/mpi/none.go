//go:build !mpi && !mpich

package mpi

import "github.com/batchkit/batchkit/trainer/collective/backend"
import "github.com/batchkit/batchkit/topology"

// Library names the MPI library this binary was built against: "" here.
const Library = ""

func New(topology.Topology, topology.Getenv) (backend.Backend, error) { return nil, ErrNotBuilt }

// LibraryVersion is the loaded MPI library's version: none here.
func LibraryVersion() string { return "" }
