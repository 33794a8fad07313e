package mpi

import (
	"fmt"
	"math"
	"strconv"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/internal/handoff"
)

// HandoffDefault is the size from which the MPI backend makes a call on
// its worker thread instead of the caller's: calls that move at least this
// many bytes on a rank (a whole allgather or reduce-scatter buffer). A call
// that outlasts the Go runtime's 10 ms sysmon limit loses its P and sets
// sysmon polling every 20 µs on the core the rank busy-polls on; on the
// worker the goroutine is parked and sysmon sleeps. The hand-over costs
// 10-20 µs, and calls of 1-5 ms ran faster on the caller's thread, so the
// default sits where calls take ~10 ms on shared memory (16 MiB here).
// BATCHKIT_MPI_HANDOFF overrides it: see mpiHandoffAt, and
// docs/mpi-backend.md for the measurements.
const HandoffDefault = 16 << 20

// mpiHandoffNever is a threshold no call reaches.
const mpiHandoffNever = math.MaxInt

// mpiHandoffAt reads the hand-over threshold from BATCHKIT_MPI_HANDOFF:
// unset or empty means HandoffDefault, 0 means never (every call on its
// caller's thread), any other count of bytes the threshold itself.
func mpiHandoffAt(getenv topology.Getenv) (int, error) {
	v := ""
	if getenv != nil {
		v = getenv(envvars.MPIHandoff)
	}
	if v == "" {
		return HandoffDefault, nil
	}
	n, err := strconv.ParseInt(v, 10, 0)
	switch {
	case err != nil || n < 0:
		return 0, &backend.SetupError{Err: fmt.Errorf("BATCHKIT_MPI_HANDOFF=%q: want a size in bytes (calls that move at least that much run on the MPI worker thread) or 0 for never", v)}
	case n == 0:
		return mpiHandoffNever, nil
	}
	return int(n), nil
}

// idlePoll reads BATCHKIT_IDLE_POLL, AllreduceIdle's sleeps between tests.
func idlePoll(getenv topology.Getenv) (handoff.IdlePoll, error) {
	v := ""
	if getenv != nil {
		v = getenv(envvars.IdlePoll)
	}
	p, err := handoff.ParseIdlePoll(v)
	if err != nil {
		return p, &backend.SetupError{Err: err}
	}
	return p, nil
}
