package collective

import (
	"errors"
	"fmt"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"sync"
)

// Comm is a communicator: every rank of the job holds one. Its methods and
// the generic functions below are safe for concurrent use (calls are
// serialised), but every rank must issue the same collectives in the same
// order.
type Comm struct {
	mu        sync.Mutex
	b         backend.Backend
	localRank int  // the launcher's word: what LOCAL_RANK says
	fallback  bool // use the Allreduce-based fallbacks even for native ops
	closed    bool
	scratch   []byte // reused by the fallbacks: no allocation per call in steady state
}

func newComm(b backend.Backend, localRank int, forceFallback bool) *Comm {
	return &Comm{b: b, localRank: localRank, fallback: forceFallback}
}

// Rank is this process's rank in [0, Size).
func (c *Comm) Rank() int { return c.b.Rank() }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.b.Size() }

// LocalRank is the rank among the processes on this node, as the launcher
// placed them (LOCAL_RANK); it selects the device or cores to bind.
func (c *Comm) LocalRank() int { return c.localRank }

// Backend names the transport: "tcp", "mpi" or "self".
func (c *Comm) Backend() string { return c.b.Name() }

// Barrier returns once every rank has entered it.
func (c *Comm) Barrier() error {
	return c.do("barrier", func() error { return c.barrier() })
}

// Close releases the communicator (and finalises MPI). Later calls return
// nil; operations on a closed Comm return ErrClosed.
func (c *Comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	forget(c)
	return c.b.Close()
}

// do runs one collective under the lock and wraps its error.
func (c *Comm) do(name string, f func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return &OpError{Op: name, Backend: c.b.Name(), Rank: c.b.Rank(), Err: ErrClosed}
	}
	if err := f(); err != nil {
		var oe *OpError
		if errors.As(err, &oe) {
			return err
		}
		return &OpError{Op: name, Backend: c.b.Name(), Rank: c.b.Rank(), Err: err}
	}
	return nil
}

// The dispatchers: the backend's native op when it has one (and fallbacks
// are not forced), else the generic fallback built on Allreduce.

func (c *Comm) broadcast(buf backend.Buffer, root int) error {
	if b, ok := c.b.(backend.Broadcaster); ok && !c.fallback {
		return b.Broadcast(buf, root)
	}
	return c.broadcastViaAllreduce(buf, root)
}

func (c *Comm) allgather(send, recv backend.Buffer) error {
	if b, ok := c.b.(backend.Allgatherer); ok && !c.fallback {
		return b.Allgather(send, recv)
	}
	return c.allgatherViaAllreduce(send, recv)
}

func (c *Comm) reduceScatter(send, recv backend.Buffer, op Op) error {
	if b, ok := c.b.(backend.ReduceScatterer); ok && !c.fallback {
		return b.ReduceScatter(send, recv, op)
	}
	return c.reduceScatterViaAllreduce(send, recv, op)
}

func (c *Comm) barrier() error {
	if b, ok := c.b.(backend.Barrierer); ok && !c.fallback {
		return b.Barrier()
	}
	return c.barrierViaAllreduce()
}

// Allreduce reduces send across all ranks into recv on every rank. Pass the
// same slice twice for an in-place call. Every rank ends with bit-identical
// recv.
func Allreduce[T Float](c *Comm, send, recv []T, op Op) error {
	return allreduce(c, send, recv, op, false)
}

// allreduce is Allreduce, or with idle AllreduceIdle.
func allreduce[T Float](c *Comm, send, recv []T, op Op, idle bool) error {
	return c.do("allreduce", func() error {
		s, r := backend.BufferOf(send), backend.BufferOf(recv)
		if err := checkOp(op); err != nil {
			return err
		}
		if err := checkPair(s, r, 1); err != nil {
			return err
		}
		base := op
		if op == Avg {
			base = Sum
		}
		if err := c.backendAllreduce(s, r, base, idle); err != nil {
			return err
		}
		if op == Avg {
			divide(recv, c.b.Size())
		}
		return nil
	})
}

// backendAllreduce is the backend's Allreduce, or with idle its
// AllreduceIdle when it has one.
func (c *Comm) backendAllreduce(s, r backend.Buffer, op Op, idle bool) error {
	if !idle {
		return c.b.Allreduce(s, r, op) // no interface lookup on the latency-bound path
	}
	if b, ok := c.b.(backend.IdleAllreducer); ok {
		return b.AllreduceIdle(s, r, op)
	}
	return c.b.Allreduce(s, r, op)
}

// AllreduceIdle is Allreduce for a call made beside compute, such as the
// trainer's gradient buckets during the backward pass: the same result,
// bit for bit, but the call waits for the other ranks without keeping a
// core busy where the backend can (IdleWait): mpi and ccl start it
// non-blocking and test it between sleeps, which frees the core for the
// compute and makes the call end up to a sleep later. Latency-bound
// callers use Allreduce.
func AllreduceIdle[T Float](c *Comm, send, recv []T, op Op) error {
	return allreduce(c, send, recv, op, true)
}

// Broadcast copies root's buf into buf on every rank.
func Broadcast[T Float](c *Comm, buf []T, root int) error {
	return c.do("broadcast", func() error {
		b := backend.BufferOf(buf)
		if b.Len == 0 {
			return errors.New("empty buffer")
		}
		if root < 0 || root >= c.b.Size() {
			return fmt.Errorf("root %d out of range for %d ranks", root, c.b.Size())
		}
		return c.broadcast(b, root)
	})
}

// Allgather concatenates every rank's send, in rank order, into recv on
// every rank: len(recv) must be Size × len(send).
func Allgather[T Float](c *Comm, send, recv []T) error {
	return c.do("allgather", func() error {
		s, r := backend.BufferOf(send), backend.BufferOf(recv)
		if err := checkPair(r, s, c.b.Size()); err != nil {
			return err
		}
		return c.allgather(s, r)
	})
}

// ReduceScatter reduces send (len = Size × len(recv)) across ranks and
// leaves block Rank of the result in recv.
func ReduceScatter[T Float](c *Comm, send, recv []T, op Op) error {
	return c.do("reducescatter", func() error {
		s, r := backend.BufferOf(send), backend.BufferOf(recv)
		if err := checkOp(op); err != nil {
			return err
		}
		if err := checkPair(s, r, c.b.Size()); err != nil {
			return err
		}
		base := op
		if op == Avg {
			base = Sum
		}
		if err := c.reduceScatter(s, r, base); err != nil {
			return err
		}
		if op == Avg {
			divide(recv, c.b.Size())
		}
		return nil
	})
}

func checkOp(op Op) error {
	if op < Sum || op > Min { // a range check: a map lookup cost ~25 ns per call
		return fmt.Errorf("unknown reduction %v", op)
	}
	return nil
}

// checkPair validates the buffers of a two-buffer collective: both non-empty,
// len(big) = factor × len(small), and no partial overlap (only an identical
// pair, an in-place allreduce, may share memory).
func checkPair(big, small backend.Buffer, factor int) error {
	switch {
	case big.Len == 0 || small.Len == 0:
		return fmt.Errorf("empty buffer (lengths %d and %d)", big.Len, small.Len)
	case big.Len != factor*small.Len && factor == 1:
		return fmt.Errorf("send and receive buffers differ in length: %d and %d", big.Len, small.Len)
	case big.Len != factor*small.Len:
		return fmt.Errorf("buffer lengths %d and %d: the larger must be %d × the smaller (one block per rank)", big.Len, small.Len, factor)
	case factor == 1 && big.Same(small):
		return nil
	case overlaps(big, small):
		return errors.New("send and receive buffers overlap")
	}
	return nil
}

// overlaps reports whether two buffers share any byte.
func overlaps(a, b backend.Buffer) bool {
	if a.Len == 0 || b.Len == 0 {
		return false
	}
	as, bs := uintptr(a.Ptr), uintptr(b.Ptr)
	ae, be := as+uintptr(a.Len*a.Type.Size()), bs+uintptr(b.Len*b.Type.Size())
	return as < be && bs < ae
}

// divide turns a sum into a mean. Every rank divides the identical sum by
// the same n, so results stay bit-identical. A division is the slow pass of
// a large mean (divss: one per 3-5 cycles, 1.1 ms for a 4.5 MB gradient),
// so it takes MeanScale's cheaper operation where that gives the same bits.
func divide[T Float](s []T, n int) {
	if n == 1 {
		return // x/1 is x
	}
	f, mul := MeanScale[T](n)
	if mul {
		for i := range s {
			s[i] *= f
		}
		return
	}
	for i := range s {
		s[i] /= f
	}
}

// MeanScale is how a sum of n ranks' values becomes their mean, Avg's x/n,
// for a caller that makes it in a pass of its own (the trainer's update
// does, in the pass that reads the gradient anyway): multiply by f when mul
// says so, else divide by f. Both give x/n's bits for every x
// (TestDivideBitIdentical): by 1 the product with 1 is x (only a
// signalling NaN, which no arithmetic makes, would have become a quiet
// one), and by a power of two the product with the exact reciprocal is the
// same correctly rounded number as the quotient.
func MeanScale[T Float](n int) (f T, mul bool) {
	if n&(n-1) == 0 {
		return 1 / T(n), true
	}
	return T(n), false
}
