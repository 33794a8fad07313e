//go:build (mpi || mpich) && !(mpi && mpich)

package mpi

// Exports for the tests of package mpi_test. Those drive the backend
// through collective.Comm, as programs do, and a test inside package mpi
// cannot import collective (collective imports mpi).

import (
	"time"

	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/internal/handoff"
)

// Backend is the MPI backend's type.
type Backend = mpiBackend

// Newest is the backend New made last: the one under the Comm Init returned.
func Newest() *Backend {
	mpiState.Lock()
	defer mpiState.Unlock()
	return mpiState.newest
}

// Counters are mpiState's counters.
type Counters struct{ InitCalls, Finalized, Open, Handoffs int }

func StateCounters() Counters {
	mpiState.Lock()
	defer mpiState.Unlock()
	return Counters{mpiState.initCalls, mpiState.finalized, mpiState.open, mpiState.handoffs}
}

// Initialized and Finalized are MPI's own view.
func Initialized() bool { return mpiInitialized() }
func Finalized() bool   { return mpiFinalized() }

// Abort calls C's abort() from MPI's side of the process.
func Abort() { cAbort() }

const HandoffNever = mpiHandoffNever

func HandoffAt(getenv topology.Getenv) (int, error) { return mpiHandoffAt(getenv) }

// SetMaxCount sets the largest count of one MPI call and returns the
// restorer of the limit before it.
func SetMaxCount(n int64) (restore func()) {
	old := mpiMaxCount
	mpiMaxCount = n
	return func() { mpiMaxCount = old }
}

// Comm is the backend's MPI communicator handle.
func (m *mpiBackend) Comm() uintptr { return uintptr(m.comm) }

func (m *mpiBackend) HandoffThreshold() int     { return m.handoffAt }
func (m *mpiBackend) SetHandoffThreshold(n int) { m.handoffAt = n }

// CLoopAllreduce is cLoop for allreduce: recv.Len elements of recv.Type,
// inPlace 1 or 0, iters calls in a row from C on the worker thread.
func (m *mpiBackend) CLoopAllreduce(send, recv backend.Buffer, op backend.Op, inPlace, iters int) (time.Duration, error) {
	return m.cLoop(mpiAllreduce, send.Ptr, recv.Ptr, recv.Len, recv.Type, op, inPlace, iters)
}

// SetIdlePoll sets AllreduceIdle's sleeps between tests.
func (m *mpiBackend) SetIdlePoll(p handoff.IdlePoll) { m.idle = p }
