package bench

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/batchkit/batchkit/trainer"
	"github.com/batchkit/batchkit/trainer/collective"
	"github.com/batchkit/batchkit/trainer/health"
)

// Options configure a Run. The zero value of a field means its default.
type Options struct {
	Op       Collective       // default Allreduce
	DType    collective.DType // default Float32
	MinBytes int64            // default DefaultMinBytes
	MaxBytes int64            // default DefaultMaxBytes
	Iters    int              // > 0 replaces Schedule's timed iterations (ScheduleIters)
	Settle   time.Duration    // untimed run before the sweep (default SettleTime; < 0: none)
	Format   Format           // default Text
	Label    string           // stored in every Result (the plot legend)
	// Report ends the run with the health report (trainer/health), rank
	// 0 writing it after the rows: text, or one {"health": ...} line in
	// JSON. Node is this rank's node in it (health.NodeName).
	Report bool
	Node   string

	// Progress, when set, shows a progress bar there on rank 0 (the CLI
	// passes stderr when it is a terminal). Rows written to the output clear
	// it first.
	Progress io.Writer
}

const (
	DefaultMinBytes = 8
	DefaultMaxBytes = 64 << 20
)

// SettleTime is how long the first size's operation runs untimed before the
// sweep, so that no measurement includes process start-up. A Go process on
// the MPI backend measured its first size 0.78-0.89x a C process (paired
// medians of 12-15 rounds, whichever size came first; no GC ran), and
// ≈1.0x after 300 ms of this. The references in reference/ do the same.
const SettleTime = 300 * time.Millisecond

// ErrNoSizes: the sweep is empty once sizes are rounded to whole elements
// (and whole blocks per rank for allgather and reducescatter).
var ErrNoSizes = errors.New("no message sizes to run")

// Run measures opts.Op on every size of the sweep. Every rank of c must call
// it with the same options. Rank 0 writes each Result to w as soon as it is
// measured (nil w: nowhere); the other ranks write nothing. Every rank returns the results.
// A wrong result of an operation is a *CheckError, the same on every rank.
func Run(c *collective.Comm, w io.Writer, opts Options) ([]Result, error) {
	opts = opts.withDefaults()
	if w == nil {
		w = io.Discard
	}
	if _, err := ParseCollective(string(opts.Op)); err != nil {
		return nil, err
	}
	if _, err := ParseFormat(string(opts.Format)); err != nil {
		return nil, err
	}
	if opts.MinBytes < 1 || opts.MaxBytes < opts.MinBytes || opts.MaxBytes > MaxSize {
		return nil, fmt.Errorf("bad size range %d..%d bytes: want 1 <= min <= max <= %s", opts.MinBytes, opts.MaxBytes, FormatSize(MaxSize))
	}
	sizes := Sizes(opts.Op, opts.DType, c.Size(), opts.MinBytes, opts.MaxBytes)
	if len(sizes) == 0 {
		return nil, fmt.Errorf("%w: %s of %s on %s needs multiples of %d bytes, and %s..%s has none",
			ErrNoSizes, opts.Op, opts.DType, plural(c.Size(), "rank"), Unit(opts.Op, opts.DType, c.Size()),
			FormatSize(opts.MinBytes), FormatSize(opts.MaxBytes))
	}
	if opts.DType == collective.Float64 {
		return run[float64](c, w, opts, sizes)
	}
	return run[float32](c, w, opts, sizes)
}

func (o Options) withDefaults() Options {
	if o.Op == "" {
		o.Op = Allreduce
	}
	if o.DType == 0 {
		o.DType = collective.Float32
	}
	if o.MinBytes == 0 {
		o.MinBytes = DefaultMinBytes
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Format == "" {
		o.Format = Text
	}
	if o.Settle == 0 {
		o.Settle = SettleTime
	}
	return o
}

// runner holds one run's buffers, allocated once for the largest size.
type runner[T collective.Float] struct {
	c          *collective.Comm
	op         Collective
	rank, n    int
	send, recv []T
	// The health report's figures over the timed iterations: the barrier
	// before them (waiting for the slowest rank), the iterations.
	iters      int
	wait, comm time.Duration
}

// buffers are the operation's send and receive slices for count elements
// (count = bytes / element size, in the size semantics of the package doc).
// Broadcast has only send (in place).
func (r *runner[T]) buffers(count int) (send, recv []T) {
	switch r.op {
	case Allreduce:
		return r.send[:count], r.recv[:count]
	case Broadcast:
		return r.send[:count], nil
	case Allgather:
		return r.send[:count/r.n], r.recv[:count]
	}
	return r.send[:count], r.recv[:count/r.n] // ReduceScatter
}

// once runs the operation one time.
func (r *runner[T]) once(send, recv []T) error {
	switch r.op {
	case Allreduce:
		return collective.Allreduce(r.c, send, recv, collective.Sum)
	case Broadcast:
		return collective.Broadcast(r.c, send, 0)
	case Allgather:
		return collective.Allgather(r.c, send, recv)
	}
	return collective.ReduceScatter(r.c, send, recv, collective.Sum)
}

func run[T collective.Float](c *collective.Comm, w io.Writer, opts Options, sizes []int64) ([]Result, error) {
	elem := int64(opts.DType.Size())
	maxCount := int(sizes[len(sizes)-1] / elem)
	r := &runner[T]{c: c, op: opts.Op, rank: c.Rank(), n: c.Size()}
	switch opts.Op {
	case Allreduce:
		r.send, r.recv = make([]T, maxCount), make([]T, maxCount)
	case Broadcast:
		r.send = make([]T, maxCount)
	case Allgather:
		r.send, r.recv = make([]T, maxCount/r.n), make([]T, maxCount)
	case ReduceScatter:
		r.send, r.recv = make([]T, maxCount), make([]T, maxCount/r.n)
	}

	root := r.rank == 0
	out := NewWriter(w, opts.Format)
	var bar *progressbar.ProgressBar
	if root && opts.Progress != nil {
		bar = progressbar.NewOptions(len(sizes),
			progressbar.OptionSetWriter(opts.Progress),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionClearOnFinish(),
		)
		defer bar.Exit()
	}

	backend := c.Backend()
	mpiLib := ""
	if backend == string(collective.MPI) { // the JSON key scripts read is MPI's
		mpiLib = collective.Library(backend)
	}
	if err := r.settle(int(sizes[0]/elem), opts.Settle); err != nil {
		return nil, fmt.Errorf("%s %s (settling): %w", opts.Op, FormatSize(sizes[0]), err)
	}
	results := make([]Result, 0, len(sizes))
	for _, bytes := range sizes {
		count := int(bytes / elem)
		warmup, iters := ScheduleIters(bytes, opts.Iters)
		if bar != nil {
			bar.Describe(fmt.Sprintf("%s %s", opts.Op, FormatSize(bytes)))
		}
		avg, lo, hi, err := r.time(count, warmup, iters)
		if err != nil {
			clearBar(bar)
			return results, fmt.Errorf("%s %s: %w", opts.Op, FormatSize(bytes), err)
		}
		if err := r.check(bytes, count); err != nil {
			clearBar(bar)
			return results, err
		}
		algbw, busbw := Bandwidths(opts.Op, r.n, bytes, avg)
		res := Result{
			Op: string(opts.Op), Backend: backend, MPILibrary: mpiLib, Label: opts.Label,
			DType: opts.DType.String(), Ranks: r.n, Bytes: bytes, Count: int64(count),
			Iters: iters, Warmup: warmup,
			AvgUs: round(avg*1e6, 3), MinUs: round(lo*1e6, 3), MaxUs: round(hi*1e6, 3),
			AlgBW: round(algbw, 6), BusBW: round(busbw, 6),
		}
		results = append(results, res)
		if root {
			clearBar(bar)
			if err := out.Write(res); err != nil {
				return results, err
			}
			if bar != nil {
				bar.Add(1)
			}
		}
	}
	if bar != nil {
		bar.Finish()
	}
	if opts.Report {
		return results, r.report(out, opts)
	}
	return results, nil
}

// report collects the health report on every rank; rank 0 writes it.
func (r *runner[T]) report(out *Writer, opts Options) error {
	s := health.Sample{Rank: r.rank, Node: opts.Node, Steps: r.iters, Wait: r.wait.Seconds(), Comm: r.comm.Seconds()}
	rep, err := health.Collect(trainer.FromCollective(r.c), s)
	if err != nil || r.rank != 0 {
		return err
	}
	return out.WriteHealth(rep)
}

func clearBar(bar *progressbar.ProgressBar) {
	if bar != nil {
		bar.Clear()
	}
}

// settle runs the operation on count elements in batches of 10 until every
// rank has spent d (decided with an allreduce, so that all ranks make the
// same calls). d <= 0: nothing.
func (r *runner[T]) settle(count int, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	send, recv := r.buffers(count)
	// The inputs are written first, as the reference programs do: untouched
	// memory would be read as the kernel's shared zero page until then.
	fillInputs(r.op, r.rank, r.n, send)
	t0 := time.Now()
	done := []float64{0}
	for done[0] == 0 {
		for range 10 {
			if err := r.once(send, recv); err != nil {
				return err
			}
		}
		done[0] = 0
		if time.Since(t0) >= d {
			done[0] = 1
		}
		if err := collective.Allreduce(r.c, done, done, collective.Min); err != nil {
			return err
		}
	}
	return nil
}

// time runs warmup untimed operations, a barrier and iters timed ones, and
// returns the mean, minimum and maximum over the ranks of each rank's time
// per operation, in seconds.
func (r *runner[T]) time(count, warmup, iters int) (avg, lo, hi float64, err error) {
	send, recv := r.buffers(count)
	fillInputs(r.op, r.rank, r.n, send)
	for range warmup {
		if err := r.once(send, recv); err != nil {
			return 0, 0, 0, err
		}
	}
	tw := time.Now()
	if err := r.c.Barrier(); err != nil {
		return 0, 0, 0, err
	}
	t0 := time.Now()
	for range iters {
		if err := r.once(send, recv); err != nil {
			return 0, 0, 0, err
		}
	}
	took := time.Since(t0)
	r.iters, r.wait, r.comm = r.iters+iters, r.wait+t0.Sub(tw), r.comm+took
	mine := took.Seconds() / float64(iters)

	sum := []float64{mine}
	if err := collective.Allreduce(r.c, sum, sum, collective.Sum); err != nil {
		return 0, 0, 0, err
	}
	ext := []float64{mine, -mine}
	if err := collective.Allreduce(r.c, ext, ext, collective.Max); err != nil {
		return 0, 0, 0, err
	}
	return sum[0] / float64(r.n), -ext[1], ext[0], nil
}
