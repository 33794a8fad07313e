package mpirun

import (
	"fmt"
	"strings"
)

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
func ParseFlavor(s string) (Flavor, error) {
	for _, f := range Flavors {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, len(Flavors))
	for i, f := range Flavors {
		names[i] = string(f)
	}
	return "", fmt.Errorf("unknown MPI flavor %q: want one of %s", s, strings.Join(names, ", "))
}

// UnmarshalText makes a Flavor field reject unknown values when decoded
// from TOML or JSON.
func (f *Flavor) UnmarshalText(b []byte) error {
	v, err := ParseFlavor(string(b))
	if err != nil {
		return err
	}
	*f = v
	return nil
}
