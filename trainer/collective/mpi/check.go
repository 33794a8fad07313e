package mpi

// The parts of the MPI backend that need no MPI library: the error type and
// the check of MPI's world against the launcher's. Built into every binary
// so that they are unit-tested without cgo.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/batchkit/batchkit/topology"
)

// ErrNotBuilt: the mpi backend asked of a binary built without MPI
// (collective re-exports it as ErrNoMPI).
var ErrNotBuilt = errors.New("collective: this binary was built without MPI (build it with `make build-mpi MPI=openmpi` or `MPI=mpich`)")

// Error is a failed MPI call.
type Error struct {
	Call  string // "MPI_Allreduce"
	Code  int    // the return code
	Class string // the error class, "MPI_ERR_TRUNCATE"; "" if unknown
	Msg   string // MPI_Error_string's text on one line
}

// Error reads "MPI_Allreduce: MPI_ERR_TRUNCATE: message truncated".
func (e *Error) Error() string {
	msg := e.Msg
	switch {
	case msg == "":
		msg = fmt.Sprintf("error code %d", e.Code)
		if e.Class != "" {
			msg = e.Class + ": " + msg
		}
	case e.Class != "" && !strings.HasPrefix(msg, e.Class):
		msg = e.Class + ": " + msg // MPICH's text does not name the class; Open MPI's does
	}
	return e.Call + ": " + msg
}

func newError(call string, code int, class, msg string) *Error {
	return &Error{Call: call, Code: code, Class: class, Msg: oneLine(msg)}
}

// oneLine joins MPICH's multi-line "error stack" into one line.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	out := strings.Join(parts, "; ")
	return strings.ReplaceAll(out, "error stack:; ", "error stack: ")
}

// WorldError: the MPI library cannot join the world the launcher started
// (another MPI's launcher, srun without the right --mpi, stale variables).
// It is the user's setup, not a runtime failure.
type WorldError struct{ Msg string }

func (e *WorldError) Error() string { return e.Msg }

func worldErrorf(format string, a ...any) error { return &WorldError{fmt.Sprintf(format, a...)} }

// mpiWireUp is, per library this package builds against, the process
// management interfaces its MPI_Init speaks; the launcher offers its own
// (its traits row) and detection adds what the variables say
// (Topology.PMI: srun --mpi=pmi2 or --mpi=pmix, an MPI launcher under the
// torchrun it started). Debian's Open MPI 4.1 has no Slurm PMI-2 support
// and its MPICH 4.0 no PMIx, like most builds: each speaks one. Intel MPI
// (an MPICH build) speaks PMIx too when pointed at the library
// (I_MPI_PMI_LIBRARY, its own setting, not the launcher's).
var mpiWireUp = map[string]struct {
	speaks      topology.PMI
	withLibrary topology.PMI // spoken when I_MPI_PMI_LIBRARY names the library
}{
	"openmpi": {speaks: topology.OffersORTE | topology.OffersPMIx},
	"mpich":   {speaks: topology.OffersPMI2, withLibrary: topology.OffersPMIx},
}

// Offered reports whether the launcher offers the built library its
// process management interface.
func Offered(built string, t topology.Topology, getenv topology.Getenv) bool {
	w, ok := mpiWireUp[built]
	if !ok {
		return false
	}
	return t.PMI&w.speaks != 0 || (t.PMI&w.withLibrary != 0 && getenv("I_MPI_PMI_LIBRARY") != "")
}

// canWireUp reports whether the built library can join the world the
// launcher started. A world of one always can (an MPI singleton).
func canWireUp(built string, t topology.Topology, getenv topology.Getenv) bool {
	return t.WorldSize == 1 || Offered(built, t, getenv)
}

// CheckWireUp refuses, before MPI_Init, a world the library cannot join:
// Open MPI would abort inside MPI_Init with a page of its own, MPICH come
// up as singletons.
func CheckWireUp(built string, t topology.Topology, getenv topology.Getenv) error {
	if canWireUp(built, t, getenv) {
		return nil
	}
	return worldErrorf("the %s launcher started %d processes (this is rank %d), which this binary's MPI cannot join: %s",
		t.Launcher, t.WorldSize, t.Rank, singletonHint(built, t.Launcher))
}

// checkWorld compares the rank and size MPI reports with the launcher's
// topology. The usual mismatch is a world of one: the binary's MPI library
// did not recognise the launcher (another MPI's mpirun, srun without
// --mpi=pmi2, torchrun) and every process came up as a singleton.
func checkWorld(built string, mpiRank, mpiSize int, t topology.Topology) error {
	if mpiRank == t.Rank && mpiSize == t.WorldSize {
		return nil
	}
	if mpiSize == 1 && t.WorldSize > 1 {
		return worldErrorf("MPI sees a world of 1 process but the %s launcher started %d (this is rank %d): every process came up as an MPI singleton, because %s",
			t.Launcher, t.WorldSize, t.Rank, singletonHint(built, t.Launcher))
	}
	if mpiSize != t.WorldSize {
		return worldErrorf("MPI sees a world of %d processes but the %s launcher started %d: "+
			"the launcher's variables do not describe this MPI job (a nested launcher or a stale RANK/WORLD_SIZE?)",
			mpiSize, t.Launcher, t.WorldSize)
	}
	return worldErrorf("MPI says this is rank %d of %d but the %s launcher says rank %d: "+
		"the launcher's variables do not describe this MPI job (a nested launcher or a stale RANK?)",
		mpiRank, mpiSize, t.Launcher, t.Rank)
}

func singletonHint(built string, l topology.Launcher) string {
	lib := map[string]string{"openmpi": "Open MPI", "mpich": "MPICH"}[built]
	if lib == "" {
		lib = "its MPI library (" + built + ")"
	}
	switch {
	case built == "openmpi" && l == topology.Hydra:
		return "this binary is built against Open MPI but was started by MPICH's mpiexec/mpirun (Hydra): start it with Open MPI's mpirun, or rebuild it with -tags mpich"
	case built == "mpich" && l == topology.OpenMPI:
		return "this binary is built against MPICH but was started by Open MPI's mpirun: start it with MPICH's mpiexec (Hydra) or srun --mpi=pmi2, or rebuild it with -tags mpi"
	case built == "mpich" && l == topology.PMIx:
		return "this binary is built against MPICH, which does not speak PMIx here: use srun --mpi=pmi2 or MPICH's mpiexec, or rebuild it with -tags mpi"
	case l == topology.Slurm:
		return fmt.Sprintf("srun gave %s no way to find its peers: pass srun --mpi=pmi2 (MPICH) or --mpi=pmix (Open MPI), or start it with mpirun", lib)
	case l == topology.Torchrun:
		return "torchrun and batchkit run do not start MPI jobs: use --backend tcp there, or start it with mpirun"
	}
	return fmt.Sprintf("the launcher is not one this binary's MPI (%s) can talk to: start it with that MPI's own mpirun, or rebuild against the launcher's MPI (-tags mpi for Open MPI, -tags mpich for MPICH)", lib)
}
