package mpirun

import (
	"fmt"
	"path/filepath"
	"strings"
)

// FlavorFromName recognises a launcher binary by its file name where the
// name says it: Debian's mpirun.openmpi / mpiexec.mpich alternatives,
// MVAPICH2's mpirun_rsh. Generic names (mpirun, mpiexec, mpiexec.hydra)
// say nothing.
func FlavorFromName(path string) (Flavor, bool) {
	base := filepath.Base(path)
	for _, n := range []struct {
		sub string
		f   Flavor
	}{
		{"openmpi", OpenMPI}, {"orterun", OpenMPI}, {"prterun", OpenMPI},
		{"mpich", MPICH},
		{"mpirun_rsh", MVAPICH}, {"mvapich", MVAPICH},
		{"intel", IntelMPI},
	} {
		if strings.Contains(base, n.sub) {
			return n.f, true
		}
	}
	return "", false
}

// FlavorFromVersion recognises a launcher from its --version output. Intel
// and MVAPICH2 are checked first: their Hydra also prints "HYDRA".
func FlavorFromVersion(out string) (Flavor, bool) {
	for _, n := range []struct {
		sub string
		f   Flavor
	}{
		{"Intel(R) MPI", IntelMPI},
		{"MVAPICH", MVAPICH},
		{"Open MPI", OpenMPI}, {"OpenRTE", OpenMPI}, {"Open RTE", OpenMPI},
		{"HYDRA", MPICH},
	} {
		if strings.Contains(out, n.sub) {
			return n.f, true
		}
	}
	return "", false
}

// Probe is how launcher discovery touches the machine, injected so that
// FindLauncher stays testable.
type Probe struct {
	LookPath func(name string) (string, error)
	// Version returns the combined output of "path --version".
	Version func(path string) (string, error)
}

// autodetect is the order flavors are guessed in when neither --flavor nor
// --mpirun is given: names that say their flavor first, then generic ones
// asked for their --version.
var autodetect = []struct {
	binary string
	flavor Flavor // "" = ask --version
}{
	{"mpirun.openmpi", OpenMPI},
	{"mpirun.mpich", MPICH},
	{"mpirun", ""},
	{"mpiexec.hydra", ""},
	{"mpirun_rsh", MVAPICH},
	{"mpiexec", ""},
}

// generic reports whether a binary's name does not say its flavor.
func generic(path string) bool {
	_, ok := FlavorFromName(path)
	return !ok
}

// FindLauncher resolves the flavor and binary of a launch. With a binary
// given, the flavor comes from its name or --version output unless given;
// with only a flavor, the binary is the first of the flavor's names on PATH
// whose --version does not name another flavor; with neither, the flavors
// are tried in the autodetect order (not for srun, where the flavor only
// picks the --mpi plugin). found is false when no binary is on
// PATH: binary is then the default name, good enough to print.
func FindLauncher(p Probe, flavor Flavor, launcher Program, binary string) (f Flavor, bin string, found bool, err error) {
	versionFlavor := func(path string) (Flavor, bool) {
		if p.Version == nil {
			return "", false
		}
		out, err := p.Version(path)
		if err != nil && out == "" {
			return "", false
		}
		return FlavorFromVersion(out)
	}
	if binary != "" {
		if flavor == "" {
			var ok bool
			if flavor, ok = FlavorFromName(binary); !ok {
				path, lerr := p.LookPath(binary)
				if lerr != nil {
					if launcher == ProgramSrun {
						return "", binary, false, nil
					}
					return "", binary, false, fmt.Errorf("cannot tell the MPI flavor of %s: %v; pass --flavor", binary, lerr)
				}
				if flavor, ok = versionFlavor(path); !ok && launcher != ProgramSrun {
					return "", binary, true, fmt.Errorf("cannot tell the MPI flavor of %s from its --version output: pass --flavor", binary)
				}
			}
		}
		_, lerr := p.LookPath(binary)
		return flavor, binary, lerr == nil, nil
	}
	if flavor == "" && launcher != ProgramSrun {
		// Under srun the flavor only picks the --mpi plugin; without one
		// the cluster's MpiDefault applies, which beats a guess.
		for _, a := range autodetect {
			path, err := p.LookPath(a.binary)
			if err != nil {
				continue
			}
			if a.flavor != "" {
				flavor = a.flavor
				break
			}
			if v, ok := versionFlavor(path); ok {
				flavor = v
				break
			}
		}
		if flavor == "" {
			return "", "", false, fmt.Errorf("no MPI launcher found on PATH (looked for %s): pass --mpirun or --flavor", autodetectNames())
		}
	}
	names := Binaries(flavor, launcher)
	if launcher == ProgramSrun {
		names = srunRow.binaries
	}
	for _, name := range names {
		path, err := p.LookPath(name)
		if err != nil {
			continue
		}
		if launcher != ProgramSrun && generic(name) {
			if v, ok := versionFlavor(path); ok && v != flavor {
				continue // /usr/bin/mpirun of another MPI
			}
		}
		return flavor, name, true, nil
	}
	if len(names) == 0 {
		return flavor, "", false, fmt.Errorf("no binaries known for flavor %q", flavor)
	}
	return flavor, names[0], false, nil
}

func autodetectNames() string {
	var n []string
	for _, a := range autodetect {
		n = append(n, a.binary)
	}
	return strings.Join(n, ", ")
}
