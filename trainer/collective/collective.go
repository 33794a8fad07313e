// Package collective is the trainer's communication layer: Allreduce,
// Broadcast, Allgather, ReduceScatter and Barrier on float32/float64 slices,
// over interchangeable backends.
//
//   - tcp: pure Go, the embedded default. Rank 0 listens at
//     MASTER_ADDR:MASTER_PORT, peers authenticate with the job token, then
//     ring / recursive-doubling algorithms run over TCP links to the
//     O(log n) ranks each rank talks to (package trainer/collective/tcp).
//   - mpi: cgo bindings to the MPI library the binary was built against
//     (build tag mpi = Open MPI, mpich = MPICH and ABI-compatible Intel MPI;
//     package trainer/collective/mpi).
//   - self: a size-1 world needs no network at all (init.go).
//
// Backends implement Allreduce (sum, max, min) and may implement the other
// operations; whatever they lack comes from a generic fallback built on
// Allreduce (fallback.go). The package-level generic functions are the API:
//
//	c, err := collective.Init(collective.Config{Topology: t})
//	defer c.Close()
//	err = collective.Allreduce(c, grads, grads, collective.Avg) // in place
//
// Every operation must be called by every rank in the same order; a Comm
// serialises concurrent calls but cannot order them across ranks.
//
// Where to read: comm.go (Comm and the generic functions), init.go (Config,
// Init and how a backend is chosen and opened), fallback.go. The contract a
// transport implements is package trainer/collective/backend. Dependencies
// point one way: collective → tcp, mpi → backend.
package collective

import (
	"fmt"

	"github.com/batchkit/batchkit/trainer/collective/backend"
)

// The API's vocabulary. The types and values are defined with the
// transports' contract in package backend; these are the names programs
// use, and the ones this package's own code uses.
type (
	// Float is the element type of every collective.
	Float = backend.Float
	// Op is a reduction operator: Sum, Avg, Max or Min.
	Op = backend.Op
	// DType is an element type: Float32 or Float64.
	DType = backend.DType
	// SetupError: the job is set up wrongly (see backend.SetupError);
	// retrying the same job cannot succeed.
	SetupError = backend.SetupError
)

const (
	Sum = backend.Sum
	Avg = backend.Avg // Sum, then divided by the world size on every rank
	Max = backend.Max // math.Max: +Inf beats NaN beats the rest, +0 beats -0; a NaN result is math.NaN()
	Min = backend.Min // math.Min: -Inf beats NaN beats the rest, -0 beats +0; a NaN result is math.NaN()

	Float32 = backend.Float32
	Float64 = backend.Float64
)

// ParseOp reads "sum", "avg", "max" or "min".
func ParseOp(s string) (Op, error) { return backend.ParseOp(s) }

// ErrClosed is returned by operations on a closed communicator.
var ErrClosed = backend.ErrClosed

// OpError says which collective failed on which rank and why.
type OpError struct {
	Op      string // "allreduce", "broadcast", ...
	Backend string
	Rank    int
	Err     error
}

func (e *OpError) Error() string {
	return fmt.Sprintf("%s (%s backend, rank %d): %v", e.Op, e.Backend, e.Rank, e.Err)
}
func (e *OpError) Unwrap() error { return e.Err }
