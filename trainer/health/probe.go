package health

import (
	"sync"
	"time"

	"github.com/batchkit/batchkit/trainer"
)

// Probe is a rank's trainer.Comm that times its steps: the trainer calls
// StepBegin and StepEnd around each step (trainer.Config's OnStepBegin and
// OnStep), and the step's first collective is preceded by a Barrier. The
// barrier's time is Wait: this rank waiting for the slowest one to finish
// its compute and arrive; the collectives' time after it is Comm, with
// every rank there; the rest of the step is Compute. The barrier costs one
// small-message latency a step, only in a run with --report.
//
// Collectives outside a step (the weight checks, checkpoints' agreement)
// pass through untimed. A Probe may be called from several goroutines (a
// trainer that starts allreduces on a goroutine of its own while it
// computes, as with gradient buckets): Wait and Comm are then the
// collectives' own times, which overlap compute, and compute is the step
// less what its goroutine was blocked on them (StepEnd's blocked), not less
// Wait and Comm, which would count what the overlap hid as idle.
type Probe struct {
	trainer.Comm
	now                func() time.Time
	mu                 sync.Mutex
	inStep, armed      bool
	begin              time.Time
	stepWait, stepComm time.Duration
	sample             Sample
	computeMedian      stepMedian
}

// NewProbe wraps c; now is the clock (nil: time.Now).
func NewProbe(c trainer.Comm, now func() time.Time) *Probe {
	if now == nil {
		now = time.Now
	}
	return &Probe{Comm: c, now: now, sample: Sample{Rank: c.Rank()}}
}

// StepBegin starts timing a step.
func (p *Probe) StepBegin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inStep, p.armed = true, true
	p.stepWait, p.stepComm = 0, 0
	p.begin = p.now()
}

// StepEnd ends the step StepBegin started (nothing without one); blocked
// is how long the step waited for its collectives (trainer.StepInfo's
// Exposed): the step's compute is the rest.
func (p *Probe) StepEnd(blocked time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inStep {
		return
	}
	p.inStep = false
	all := p.now().Sub(p.begin)
	p.sample.Steps++
	p.sample.Wait += p.stepWait.Seconds()
	p.sample.Comm += p.stepComm.Seconds()
	compute := max(0, all-blocked)
	p.sample.Compute += compute.Seconds()
	p.computeMedian.add(compute)
}

// Sample is this rank's figures so far (Node and LinkGBs are the caller's).
func (p *Probe) Sample() Sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sample
	s.ComputeStep = p.computeMedian.seconds()
	return s
}

// timed runs a collective of the step: after a Barrier when it is the
// step's first.
func (p *Probe) timed(f func() error) error {
	p.mu.Lock()
	inStep, first := p.inStep, p.armed
	p.armed = false
	p.mu.Unlock()
	if !inStep {
		return f()
	}
	t0 := p.now()
	var wait time.Duration
	if first {
		if err := p.Comm.Barrier(); err != nil {
			return err
		}
		t1 := p.now()
		wait, t0 = t1.Sub(t0), t1
	}
	err := f()
	comm := p.now().Sub(t0)
	p.mu.Lock()
	p.stepWait += wait
	p.stepComm += comm
	p.mu.Unlock()
	return err
}

func (p *Probe) AllreduceSum(buf []float32) error {
	return p.timed(func() error { return p.Comm.AllreduceSum(buf) })
}

// AllreduceSumIdle is AllreduceSum made beside compute (trainer.IdleComm).
func (p *Probe) AllreduceSumIdle(buf []float32) error {
	return p.timed(func() error { return trainer.AllreduceSumIdle(p.Comm, buf) })
}

func (p *Probe) Allgather(send, recv []float64) error {
	return p.timed(func() error { return p.Comm.Allgather(send, recv) })
}

func (p *Probe) Barrier() error { return p.timed(p.Comm.Barrier) }

// Broadcaster is a communicator that can broadcast, which ProbeLinks needs
// (trainer.FromCollective's and a LocalWorld's Comm are).
type Broadcaster interface {
	Broadcast(buf []float32, root int) error
}

// LinkBytes and LinkReps: ProbeLinks broadcasts 1 MiB from each rank,
// keeping the best of 10 (the least disturbed by other work on the node).
const (
	LinkBytes = 1 << 20
	LinkReps  = 10
)

// ProbeLinks measures, on every rank of c together, each rank's link
// bandwidth: bytes broadcast from it, timed on it from a barrier to a
// barrier after the broadcast (every rank has the data), the best of reps.
// The roots take turns, after one untimed round: the first transfers of a
// TCP connection are slower (its windows grow), and a burst of other work
// on the node falls on every root alike. It returns this rank's, in GB/s
// (1e9 B/s). With one rank it is 0: there is no link.
func ProbeLinks(c Comm, b Broadcaster, bytes, reps int, now func() time.Time) (float64, error) {
	if c.Size() < 2 {
		return 0, nil
	}
	if now == nil {
		now = time.Now
	}
	buf := make([]float32, bytes/4)
	var best time.Duration
	for rep := range reps + 1 {
		for root := range c.Size() {
			if err := c.Barrier(); err != nil {
				return 0, err
			}
			t0 := now()
			if err := b.Broadcast(buf, root); err != nil {
				return 0, err
			}
			if err := c.Barrier(); err != nil {
				return 0, err
			}
			if d := now().Sub(t0); rep > 0 && root == c.Rank() && (best == 0 || d < best) {
				best = d
			}
		}
	}
	if best <= 0 {
		return 0, nil
	}
	return float64(4*len(buf)) / best.Seconds() / 1e9, nil
}
