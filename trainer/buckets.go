package trainer

import (
	"errors"
	"time"
)

// Gradient buckets, as PyTorch DDP's: the step's buffer is [extras |
// gradient] (train.go), and instead of one allreduce after the backward
// pass, spans of it (buckets) are allreduced as soon as backward has made
// them final, on a goroutine of their own, while the earlier layers are
// still being computed. The sums are the same numbers the one call gives
// wherever the backend's per-element sum does not depend on how the buffer
// is cut: at 2 ranks on every backend (a + b = b + a exactly), and in a
// LocalWorld at any size. Elsewhere (3+ ranks over a ring, whose chunk
// boundaries move with the buffer) the weights are the same on every rank
// and from run to run at one bucket size, but may differ from the unbucketed
// ones in the last bits (docs/reference/train.md, "Gradient buckets").

// bucket is the span [lo, hi) of the step's buffer that one allreduce
// sums, once layer `layer`'s gradient (the lowest layer it holds) is
// final. The last bucket of a plan holds layer 0 and the extras: it goes
// when the step has filled them, after the backward pass.
type bucket struct{ lo, hi, layer int }

// bucketPlan cuts the step's buffer, nExtra extras then m's gradient, into
// buckets as DDP does: layers in the order backward finishes them (the
// last first), a bucket closed once it holds capBytes or more, no layer
// split across two. capBytes 0 is one bucket, the whole buffer, sent after
// the backward pass: the step without overlap.
func bucketPlan(m MLP, extras, capBytes int) []bucket {
	end := extras + m.NumParams()
	if capBytes <= 0 {
		return []bucket{{lo: 0, hi: end, layer: 0}}
	}
	var plan []bucket
	hi := end
	lo := end
	for i := len(m.Sizes) - 2; i > 0; i-- {
		lo -= m.Sizes[i]*m.Sizes[i+1] + m.Sizes[i+1]
		if (hi-lo)*4 >= capBytes {
			plan = append(plan, bucket{lo: lo, hi: hi, layer: i})
			hi = lo
		}
	}
	return append(plan, bucket{lo: 0, hi: hi, layer: 0})
}

// CommStats is the time a rank's steps spent in the gradient allreduce:
// Total, the calls' own time (on the goroutine that makes them), and
// Exposed, what the step waited for them after its backward pass. Without
// buckets the two are equal; Total − Exposed is what the overlap hid.
// Measured with time.Now (monotonic), not Config.Now: the calls run on a
// goroutine of their own.
type CommStats struct {
	Total, Exposed time.Duration
}

// overlap makes the allreduces of one rank's plan: on the step's goroutine
// for a plan of one bucket, else on one goroutine of its own, in plan
// order (the same on every rank, as Comm requires).
type overlap struct {
	c     Comm
	buf   []float32
	plan  []bucket
	next  int // the next bucket to send
	queue chan call
	done  chan callResult
	stats CommStats
}

// call is one bucket's allreduce: beside compute (sent by ready, while
// backward runs) it waits idle (AllreduceSumIdle: the backward pass needs
// the core more than the call's wait does); sent by finish, with nothing
// left to compute, it polls (AllreduceSum: the lowest latency).
type call struct {
	buf    []float32
	beside bool
}

type callResult struct {
	err  error
	took time.Duration
}

func newOverlap(c Comm, buf []float32, plan []bucket) *overlap {
	o := &overlap{c: c, buf: buf, plan: plan}
	if len(plan) > 1 {
		o.queue, o.done = make(chan call, len(plan)), make(chan callResult, len(plan))
		go o.loop()
	}
	return o
}

// loop makes the calls queued. After a failure it makes no more (a
// collective after a failed one may wait for ever) and repeats the error.
func (o *overlap) loop() {
	var failed error
	for b := range o.queue {
		if failed != nil {
			o.done <- callResult{err: failed}
			continue
		}
		t0 := time.Now()
		if b.beside {
			failed = AllreduceSumIdle(o.c, b.buf)
		} else {
			failed = o.c.AllreduceSum(b.buf)
		}
		o.done <- callResult{err: failed, took: time.Since(t0)}
	}
}

// ready is LossGradEach's hook: it sends every bucket whose layers are all
// final now that layer is, except the last, which waits for the extras.
func (o *overlap) ready(layer int) {
	for o.queue != nil && o.next < len(o.plan)-1 && o.plan[o.next].layer >= layer {
		b := o.plan[o.next]
		o.queue <- call{buf: o.buf[b.lo:b.hi], beside: true}
		o.next++
	}
}

// finish sends what is left (the extras are filled) and waits for every
// call of the step; it returns the first error.
func (o *overlap) finish() error {
	t0 := time.Now()
	if o.queue == nil {
		err := o.c.AllreduceSum(o.buf)
		took := time.Since(t0)
		o.stats.Total += took
		o.stats.Exposed += took
		return err
	}
	for ; o.next < len(o.plan); o.next++ {
		b := o.plan[o.next]
		o.queue <- call{buf: o.buf[b.lo:b.hi]}
	}
	var first error
	for range o.plan {
		r := <-o.done
		o.stats.Total += r.took
		if first == nil {
			first = r.err
		}
	}
	o.stats.Exposed += time.Since(t0)
	o.next = 0
	return first
}

// stop ends the goroutine; the overlap is idle (finish has returned).
func (o *overlap) stop() {
	if o != nil && o.queue != nil {
		close(o.queue)
		o.queue = nil
	}
}

// errBucketSize is a negative Config.BucketBytes.
var errBucketSize = errors.New("bucket size must be >= 0 (0: one allreduce after the backward pass)")
