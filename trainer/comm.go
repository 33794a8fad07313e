package trainer

import (
	"errors"
	"sync"

	"github.com/batchkit/batchkit/trainer/collective"
)

// Comm is what the loop needs from the job's communicator. Every rank calls
// the same methods in the same order; results are bit-identical on every
// rank.
type Comm interface {
	Rank() int
	Size() int
	// AllreduceSum replaces buf with the element-wise sum over the ranks
	// (the loop's update turns the gradient's sum into the mean in the
	// pass that reads it: SGD.StepMean).
	AllreduceSum(buf []float32) error
	// Allgather writes every rank's send, in rank order, into recv
	// (Size × len(send) long).
	Allgather(send, recv []float64) error
	// Barrier returns once every rank has entered it.
	Barrier() error
}

// IdleComm is a Comm that can also sum beside compute, waiting for
// the other ranks without keeping a core busy (collective.AllreduceIdle):
// the gradient buckets' calls, made while the backward pass runs, go
// through it when the Comm has it (AllreduceSumIdle).
type IdleComm interface {
	AllreduceSumIdle(buf []float32) error
}

// AllreduceSumIdle is c's AllreduceSumIdle when c is an IdleComm, else its
// AllreduceSum: the same numbers either way.
func AllreduceSumIdle(c Comm, buf []float32) error {
	if ic, ok := c.(IdleComm); ok {
		return ic.AllreduceSumIdle(buf)
	}
	return c.AllreduceSum(buf)
}

// FromCollective adapts a trainer/collective communicator.
func FromCollective(c *collective.Comm) Comm { return collectiveComm{c} }

type collectiveComm struct{ c *collective.Comm }

func (a collectiveComm) Rank() int { return a.c.Rank() }
func (a collectiveComm) Size() int { return a.c.Size() }
func (a collectiveComm) AllreduceSum(buf []float32) error {
	return collective.Allreduce(a.c, buf, buf, collective.Sum)
}
func (a collectiveComm) AllreduceSumIdle(buf []float32) error {
	return collective.AllreduceIdle(a.c, buf, buf, collective.Sum)
}
func (a collectiveComm) Allgather(send, recv []float64) error {
	return collective.Allgather(a.c, send, recv)
}
func (a collectiveComm) Barrier() error { return a.c.Barrier() }

// Broadcast is not the loop's: the health report's link probe
// (health.Broadcaster) asks for it.
func (a collectiveComm) Broadcast(buf []float32, root int) error {
	return collective.Broadcast(a.c, buf, root)
}

// ErrAborted is returned by a LocalWorld's operations once it is aborted.
var ErrAborted = errors.New("trainer: local world aborted")

// NewLocalWorld is a world of n ranks inside this process, one Comm per
// rank, each to be used by its own goroutine: the collective world is a
// process singleton, so tests of several ranks need this one. Reductions sum
// in rank order, so results are deterministic and the same on every rank.
func NewLocalWorld(n int) *LocalWorld {
	w := &LocalWorld{n: n, f32: make([][]float32, n), f64: make([][]float64, n)}
	w.cond = sync.NewCond(&w.mu)
	for r := range n {
		w.Comms = append(w.Comms, &localComm{w: w, rank: r})
	}
	return w
}

// LocalWorld is an in-process world (NewLocalWorld).
type LocalWorld struct {
	Comms []Comm

	n       int
	mu      sync.Mutex
	cond    *sync.Cond
	waiting int
	gen     uint64
	aborted bool
	f32     [][]float32 // each rank's contribution to the current call
	f64     [][]float64
}

// Abort fails every pending and later operation with ErrAborted: a rank that
// returns early must not leave the others waiting for ever.
func (w *LocalWorld) Abort() {
	w.mu.Lock()
	w.aborted = true
	w.cond.Broadcast()
	w.mu.Unlock()
}

// barrier waits for all n ranks.
func (w *LocalWorld) barrier() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.aborted {
		return ErrAborted
	}
	gen := w.gen
	if w.waiting++; w.waiting == w.n {
		w.waiting, w.gen = 0, w.gen+1
		w.cond.Broadcast()
		return nil
	}
	for gen == w.gen && !w.aborted {
		w.cond.Wait()
	}
	if gen == w.gen { // aborted before everyone came
		return ErrAborted
	}
	return nil
}

type localComm struct {
	w    *LocalWorld
	rank int
}

func (c *localComm) Rank() int      { return c.rank }
func (c *localComm) Size() int      { return c.w.n }
func (c *localComm) Barrier() error { return c.w.barrier() }

// AllreduceSum: publish a copy, wait, sum the copies in rank order, wait
// again so that no rank overwrites its copy while another still reads it.
func (c *localComm) AllreduceSum(buf []float32) error {
	c.w.f32[c.rank] = append(c.w.f32[c.rank][:0], buf...)
	if err := c.w.barrier(); err != nil {
		return err
	}
	for i := range buf {
		var s float32
		for r := range c.w.n {
			s += c.w.f32[r][i]
		}
		buf[i] = s
	}
	return c.w.barrier()
}

func (c *localComm) Allgather(send, recv []float64) error {
	if len(recv) != c.w.n*len(send) {
		return errors.New("allgather: recv is not Size × len(send) long")
	}
	c.w.f64[c.rank] = append(c.w.f64[c.rank][:0], send...)
	if err := c.w.barrier(); err != nil {
		return err
	}
	for r := range c.w.n {
		copy(recv[r*len(send):], c.w.f64[r])
	}
	return c.w.barrier()
}

// Broadcast copies root's buf to every rank (health.Broadcaster).
func (c *localComm) Broadcast(buf []float32, root int) error {
	if c.rank == root {
		c.w.f32[root] = append(c.w.f32[root][:0], buf...)
	}
	if err := c.w.barrier(); err != nil {
		return err
	}
	copy(buf, c.w.f32[root])
	return c.w.barrier()
}
