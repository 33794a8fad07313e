package mpirun

import (
	"context"
	"errors"
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
	// Version returns the combined output of "path --version". An error
	// that is context.DeadlineExceeded (the launcher did not answer in
	// time) stops the search; any other just means no flavor is read.
	Version func(path string) (string, error)
}

// versionFlavor is the flavor path's --version output names; err only
// when the probe timed out, which FindLauncher reports rather than
// guessing past a launcher that hangs.
func (p Probe) versionFlavor(path string) (Flavor, bool, error) {
	if p.Version == nil {
		return "", false, nil
	}
	out, err := p.Version(path)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "", false, err
	case err != nil && out == "":
		return "", false, nil
	}
	f, ok := FlavorFromVersion(out)
	return f, ok, nil
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
// PATH: binary is then the default name, good enough to print. A --version
// probe that timed out is the error.
func FindLauncher(p Probe, flavor Flavor, launcher Program, binary string) (f Flavor, bin string, found bool, err error) {
	if binary != "" {
		return p.givenBinary(flavor, launcher, binary)
	}
	if flavor == "" && launcher != ProgramSrun {
		// Under srun the flavor only picks the --mpi plugin; without one
		// the cluster's MpiDefault applies, which beats a guess.
		if flavor, err = p.autodetect(); err != nil {
			return "", "", false, err
		}
	}
	names := Binaries(flavor, launcher)
	if launcher == ProgramSrun {
		names = srunRow.binaries
	}
	var wrong error // the first generic name found that is another MPI's
	for _, name := range names {
		path, err := p.LookPath(name)
		if err != nil {
			continue
		}
		if launcher != ProgramSrun && generic(name) {
			v, ok, err := p.versionFlavor(path)
			if err != nil {
				return "", "", false, err
			}
			if ok && v != flavor {
				if wrong == nil {
					wrong = WrongMPI(name, path, v, flavor)
				}
				continue // /usr/bin/mpirun of another MPI
			}
		}
		return flavor, name, true, nil
	}
	if len(names) == 0 {
		return flavor, "", false, fmt.Errorf("no binaries known for flavor %q", flavor)
	}
	if wrong != nil {
		return flavor, names[0], false, wrong
	}
	return flavor, names[0], false, nil
}

// WrongMPIError is a launcher of flavor Want found on PATH that is
// another MPI's: Name (at Path) answered --version as Got's. FindLauncher
// returns it with the flavor and binary it would otherwise have returned:
// a dry run, which may be for another machine, goes on.
type WrongMPIError struct {
	Name, Path string
	Got, Want  Flavor
}

func (e *WrongMPIError) Error() string {
	where := e.Name
	if e.Path != "" && e.Path != e.Name {
		where += " (" + e.Path + ")"
	}
	return fmt.Sprintf("%s is %s's, not %s's: %s, or give its launcher with --mpirun PATH",
		where, flavorRows[e.Got].name, flavorRows[e.Want].name, fixPath[e.Want])
}

// WrongMPI is a *WrongMPIError.
func WrongMPI(name, path string, got, want Flavor) error {
	return &WrongMPIError{Name: name, Path: path, Got: got, Want: want}
}

// NotFound is the error for a launch whose launcher binary is nowhere: it
// says what was looked for and what to do (put the flavor's first on
// PATH, give --mpirun), not just "not found".
func NotFound(binary string, f Flavor, launcher Program) error {
	switch {
	case strings.Contains(binary, "/"):
		return fmt.Errorf("%s: no such launcher: give the path of an installed one with --mpirun PATH", binary)
	case launcher == ProgramSrun:
		return fmt.Errorf("%s: not found on PATH: --launcher srun needs Slurm's srun (run where Slurm is installed, or pick --launcher mpirun)", binary)
	case fixPath[f] != "":
		return fmt.Errorf("%s: %s's launcher not found on PATH (looked for %s): %s, or give its launcher with --mpirun PATH",
			binary, flavorRows[f].name, strings.Join(Binaries(f, launcher), ", "), fixPath[f])
	}
	return fmt.Errorf("%s: launcher not found on PATH: put its directory on PATH or give it with --mpirun PATH", binary)
}

// fixPath says how to put a flavor's launcher first on PATH.
var fixPath = map[Flavor]string{
	IntelMPI: "put Intel MPI's first on PATH (activate the venv with the impi-rt wheel, or use --profile intel-pip; oneAPI: source setvars.sh)",
	OpenMPI:  "put Open MPI's bin directory first on PATH",
	MPICH:    "put MPICH's bin directory first on PATH (Debian: mpirun.mpich)",
	MVAPICH:  "put MVAPICH2's bin directory first on PATH",
}

// givenBinary is FindLauncher for a binary the user named: its flavor from
// its name or its --version output, unless given.
func (p Probe) givenBinary(flavor Flavor, launcher Program, binary string) (Flavor, string, bool, error) {
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
			flavor, ok, err := p.versionFlavor(path)
			switch {
			case err != nil:
				return "", binary, true, err
			case !ok && launcher != ProgramSrun:
				return "", binary, true, fmt.Errorf("cannot tell the MPI flavor of %s from its --version output: pass --flavor", binary)
			}
			return flavor, binary, true, nil
		}
	}
	path, lerr := p.LookPath(binary)
	if lerr == nil && launcher != ProgramSrun && generic(binary) && !strings.Contains(binary, "/") {
		// A generic name looked up on PATH that is another MPI's (a
		// profile's binary = "mpirun" with the wrong MPI first on PATH)
		// would start ranks that cannot talk to each other, or fail far
		// from the cause. A path is the user's own choice: not asked.
		v, ok, err := p.versionFlavor(path)
		if err != nil {
			return "", binary, true, err
		}
		if ok && v != flavor {
			return flavor, binary, true, WrongMPI(binary, path, v, flavor)
		}
	}
	return flavor, binary, lerr == nil, nil
}

// autodetect is the first flavor of the autodetect order on PATH.
func (p Probe) autodetect() (Flavor, error) {
	for _, a := range autodetect {
		path, err := p.LookPath(a.binary)
		if err != nil {
			continue
		}
		if a.flavor != "" {
			return a.flavor, nil
		}
		v, ok, err := p.versionFlavor(path)
		if err != nil {
			return "", err
		}
		if ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no MPI launcher found on PATH (looked for %s): pass --mpirun or --flavor", autodetectNames())
}

func autodetectNames() string {
	var n []string
	for _, a := range autodetect {
		n = append(n, a.binary)
	}
	return strings.Join(n, ", ")
}
