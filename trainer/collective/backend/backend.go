package backend

import (
	"errors"
	"fmt"
	"unsafe"
)

// Float is the element type of every collective.
type Float interface{ ~float32 | ~float64 }

// Op is a reduction operator. It is a closed set.
type Op uint8

const (
	Sum Op = iota + 1
	Avg    // Sum, then divided by the world size on every rank
	Max    // math.Max: +Inf beats NaN beats the rest, +0 beats -0; a NaN result is math.NaN()
	Min    // math.Min: -Inf beats NaN beats the rest, -0 beats +0; a NaN result is math.NaN()
)

var opNames = map[Op]string{Sum: "sum", Avg: "avg", Max: "max", Min: "min"}

func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// ParseOp reads "sum", "avg", "max" or "min".
func ParseOp(s string) (Op, error) {
	for o, name := range opNames {
		if name == s {
			return o, nil
		}
	}
	return 0, fmt.Errorf("unknown reduction %q (want sum, avg, max or min)", s)
}

// DType is the element type of a Buffer.
type DType uint8

const (
	Float32 DType = iota + 1
	Float64
)

// Size is the element size in bytes.
func (d DType) Size() int {
	if d == Float64 {
		return 8
	}
	return 4
}

func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Buffer is an untyped view of a float32 or float64 slice: what backends
// see. It never owns memory; backends must not keep it after a call returns.
type Buffer struct {
	Ptr  unsafe.Pointer
	Len  int // elements
	Type DType
}

// BufferOf views a typed slice as a Buffer.
func BufferOf[T Float](s []T) Buffer {
	var zero T
	dt := Float32
	if unsafe.Sizeof(zero) == 8 {
		dt = Float64
	}
	if len(s) == 0 {
		return Buffer{Type: dt}
	}
	return Buffer{Ptr: unsafe.Pointer(unsafe.SliceData(s)), Len: len(s), Type: dt}
}

// Bytes is the buffer's memory as bytes.
func (b Buffer) Bytes() []byte {
	if b.Len == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(b.Ptr), b.Len*b.Type.Size())
}

// Float32s views a Float32 buffer as a slice.
func (b Buffer) Float32s() []float32 {
	if b.Len == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(b.Ptr), b.Len)
}

// Float64s views a Float64 buffer as a slice.
func (b Buffer) Float64s() []float64 {
	if b.Len == 0 {
		return nil
	}
	return unsafe.Slice((*float64)(b.Ptr), b.Len)
}

// Slice is the sub-buffer of elements [from, to).
func (b Buffer) Slice(from, to int) Buffer {
	if from < 0 || to < from || to > b.Len {
		panic(fmt.Sprintf("collective: Buffer.Slice(%d, %d) out of range for length %d", from, to, b.Len))
	}
	if from == to {
		return Buffer{Type: b.Type}
	}
	return Buffer{Ptr: unsafe.Add(b.Ptr, from*b.Type.Size()), Len: to - from, Type: b.Type}
}

// Same reports whether two buffers are the same memory (an in-place call).
func (b Buffer) Same(o Buffer) bool { return b.Ptr == o.Ptr && b.Len == o.Len && b.Type == o.Type }

// Backend is one transport. Rank and Size never change. (The local rank is
// the launcher's, kept by collective.Comm: backends need not rediscover it.)
//
// Allreduce receives Sum, Max or Min (never Avg: the dispatcher divides) and
// send.Same(recv) for an in-place call; the buffers are validated non-empty,
// equal in length and type, and otherwise disjoint.
type Backend interface {
	Name() string
	Rank() int
	Size() int
	Allreduce(send, recv Buffer, op Op) error
	Close() error
}

// The optional operations. A backend that implements one is called for it;
// otherwise collective's Allreduce-based fallback runs (its fallback.go).
type (
	// Broadcaster copies root's buf into every rank's buf.
	Broadcaster interface {
		Broadcast(buf Buffer, root int) error
	}
	// Allgatherer concatenates every rank's send (equal lengths) in rank
	// order into recv (len(recv) = Size × len(send)); send and recv are disjoint.
	Allgatherer interface {
		Allgather(send, recv Buffer) error
	}
	// ReduceScatterer reduces send (len = Size × len(recv)) across ranks and
	// leaves block Rank of the result in recv; op is Sum, Max or Min; send and
	// recv are disjoint.
	ReduceScatterer interface {
		ReduceScatter(send, recv Buffer, op Op) error
	}
	// Barrierer returns on every rank only after every rank has entered it.
	Barrierer interface {
		Barrier() error
	}
	// IdleAllreducer is Allreduce, bit for bit, for a call made beside
	// compute: it waits for its peers without keeping a core busy (a
	// non-blocking call tested between sleeps), where Allreduce polls for
	// the lowest latency.
	IdleAllreducer interface {
		AllreduceIdle(send, recv Buffer, op Op) error
	}
)

// ErrClosed is returned by operations on a closed communicator or backend.
var ErrClosed = errors.New("collective: communicator is closed")

// SetupError: the job is set up wrongly (ranks with different tokens or
// world sizes, two processes with one rank, MASTER_ADDR that does not
// resolve, MASTER_PORT taken, a bad BATCHKIT_MPI_HANDOFF), not a failure
// while it ran: retrying the same job cannot succeed.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }
