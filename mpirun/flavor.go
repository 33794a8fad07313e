package mpirun

import "github.com/batchkit/batchkit/internal/closed"

// Flavor is an MPI implementation. It is a closed set, validated wherever a
// flavor enters batchkit (profile load, --flavor), so that code further in
// can index per-flavor data rows without checking again.
type Flavor string

const (
	OpenMPI  Flavor = "openmpi"
	MPICH    Flavor = "mpich"
	IntelMPI Flavor = "intelmpi"
	MVAPICH  Flavor = "mvapich"
)

// Flavors lists every valid flavor, in documentation order.
var Flavors = []Flavor{OpenMPI, MPICH, IntelMPI, MVAPICH}

// ParseFlavor validates s.
func ParseFlavor(s string) (Flavor, error) { return closed.Parse("MPI flavor", s, Flavors) }

// UnmarshalText makes a Flavor field reject unknown values when decoded
// from TOML or JSON.
func (f *Flavor) UnmarshalText(b []byte) error { return closed.Unmarshal(f, "MPI flavor", b, Flavors) }
