package trainer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/batchkit/batchkit/trainer/gemm"
)

// Config is one training run. Every rank passes the same.
type Config struct {
	Hidden                    []int
	Epochs                    int
	BatchSize                 int // per rank
	LR, Momentum, WeightDecay float32
	Seed                      uint64

	// CheckEvery: every so many steps (and at the start and the end) the
	// ranks compare hashes of their weights; 0: start and end only.
	CheckEvery int
	// CheckpointDir: where rank 0 writes checkpoints and every rank looks
	// for one to resume from ("" = none). CheckpointEvery: every so many
	// steps (0: only at the end and on preemption).
	CheckpointDir   string
	CheckpointEvery int
	// BucketBytes: the gradient is summed in buckets of about this many
	// bytes (layers never split, the last layer first), each started on a
	// goroutine of its own as soon as the backward pass has made it final,
	// while the earlier layers are computed, as PyTorch DDP's bucket_cap_mb
	// does (buckets.go). 0: one allreduce after the backward pass.
	BucketBytes int

	// JobID is the job a checkpoint directory's lock names besides host
	// and PID (dirlock.Owner): batchkit train's is the Slurm job id.
	JobID string

	// Stop reports whether this rank was asked to stop, and why (a signal,
	// say). It is polled once a step, and once more after the checkpoint of
	// a stop; nil is never. A Cancel anywhere beats a Preempt: the run then
	// ends as cancelled on every rank.
	Stop func() StopReason
	// Warn receives what the run survives: a file named as a checkpoint
	// that is skipped (*SkippedError), a dead run's lock taken over.
	Warn func(error)
	// Now is the clock for samples/s and elapsed times (nil: time.Now).
	Now func() time.Time
	// Gemm is the model's matrix multiply (nil: gonum; gemm.Open).
	Gemm gemm.Impl

	OnStart func(Start) error // once, after any resume
	// OnStepBegin is called at the start of every step, before its batch
	// is read; with OnStep it bounds the step (the health report times
	// the step between them).
	OnStepBegin func()
	OnStep      func(StepInfo) error  // after every step; an error ends the run
	OnEpoch     func(EpochInfo) error // after every epoch
	// OnEnd gets the result once the run has it, before the final
	// checkpoint is written: a report made there is not lost when
	// writing fails (a full disk). Its error ends the run (after that
	// checkpoint).
	OnEnd func(Result) error
}

// Start describes the run about to train.
type Start struct {
	Model          MLP
	StepsPerEpoch  int
	TotalSteps     int
	ResumedFrom    int    // the checkpoint's global step, 0 for a fresh run
	ResumedFile    string // its path
	ResumedAtEpoch int
}

// StepInfo is one step's global figures (the same on every rank).
type StepInfo struct {
	Epoch, GlobalStep int
	Loss              float64 // mean over the step's samples of all ranks
	// Exposed is how long this rank's step waited for its gradient
	// allreduce after the backward pass: all of it without buckets, what
	// the overlap did not hide with them (CommStats.Exposed of one step).
	Exposed time.Duration
}

// EpochInfo is one epoch's figures (the same on every rank).
type EpochInfo struct {
	Epoch            int // 1-based: epochs done
	GlobalStep       int
	Loss, TrainAcc   float64 // over the epoch's samples, as trained on
	TestLoss         float64
	TestAcc          float64
	SamplesPerSecond float64       // all ranks' samples over this run's time in the epoch's steps (evaluation excluded)
	Comm             CommStats     // this rank's gradient allreduces in the epoch's steps
	Elapsed          time.Duration // from just before this run's first step to the end of this epoch's evaluation
}

// Result is the end of a run.
type Result struct {
	Model             MLP
	Params            []float32
	Epochs, Steps     int // global step at the end
	ResumedFrom       int
	TestLoss, TestAcc float64
	SamplesPerSecond  float64   // over this run's steps (from the first, per-epoch evaluations included)
	Comm              CommStats // this rank's gradient allreduces over this run's steps
	// Diverged: the run stopped where its numbers stopped being finite;
	// then Epochs are those done, Steps the step it stopped at, and there
	// are no Params nor test figures (Train returns a *NonFiniteError).
	Diverged *Divergence
}

// WeightsSHA256 is the SHA-256 of p's little-endian float32 bytes, hex.
func WeightsSHA256(p []float32) string {
	s := sha256.Sum256(appendFloats(nil, p))
	return hex.EncodeToString(s[:])
}

// StopReason is why a rank was asked to stop (Config.Stop).
type StopReason uint8

const (
	// NoStop: carry on.
	NoStop StopReason = iota
	// Preempt: stop now to be run again later (the job will come back,
	// requeued): a checkpoint is what the next run resumes from.
	Preempt
	// Cancel: stop for good (the job is cancelled or out of time). A
	// checkpoint is still written, for whoever starts the run again.
	Cancel
)

func (s StopReason) String() string {
	switch s {
	case NoStop:
		return "no stop"
	case Preempt:
		return "preempted"
	case Cancel:
		return "cancelled"
	}
	return fmt.Sprintf("StopReason(%d)", uint8(s))
}

// PreemptedError ends a run that a rank was asked to stop: every rank
// finished the same step, rank 0 wrote Checkpoint ("" without a checkpoint
// dir; every rank names the file), and every rank has the same Reason
// (Cancel when any rank was asked to cancel by the time the checkpoint was
// written).
type PreemptedError struct {
	Step       int
	Checkpoint string
	Reason     StopReason // Preempt or Cancel
}

func (e *PreemptedError) Error() string {
	if e.Checkpoint == "" {
		return fmt.Sprintf("%s after step %d (no --checkpoint-dir: nothing saved)", e.Reason, e.Step)
	}
	return fmt.Sprintf("%s after step %d: checkpoint %s", e.Reason, e.Step, e.Checkpoint)
}

// Divergence is where a run's numbers stopped being finite: the step (from
// 1, global) and its epoch (from 1), what became NaN or infinite ("loss",
// "weights" or "test loss") and its value ("NaN", "+Inf" or "-Inf": JSON
// has no such numbers).
type Divergence struct {
	Step  int    `json:"step"`
	Epoch int    `json:"epoch"`
	What  string `json:"what"`
	Value string `json:"value"`
}

// NonFiniteError ends a run that diverged: its loss or weights became NaN
// or infinite at a step (a learning rate too large for the batch, say).
// Every rank stops at that step, whose numbers nothing reports (OnStep,
// OnEpoch and OnEnd only ever see finite ones) and no checkpoint keeps:
// the newest, if any, is from before it. Running again diverges again.
type NonFiniteError struct{ Divergence }

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("training diverged at step %d (epoch %d): the %s became %s; a smaller learning rate or a larger batch may help",
		e.Step, e.Epoch, e.What, e.Value)
}

// PeerFailedError is what the other ranks return when rank Rank stopped
// the run on an error of its own (a checkpoint it could not write) at
// step Step: its error says what.
type PeerFailedError struct{ Rank, Step int }

func (e *PeerFailedError) Error() string {
	return fmt.Sprintf("step %d: rank %d failed (its error says why)", e.Step, e.Rank)
}

// DivergedError is ranks whose weights differ from rank 0's: a bug or
// broken hardware, never a state to train on.
type DivergedError struct {
	Step  int
	Ranks []int
}

func (e *DivergedError) Error() string {
	return fmt.Sprintf("step %d: the weights of rank(s) %v differ from rank 0's", e.Step, e.Ranks)
}

// IncompatibleError is a checkpoint of another model, data set or world.
type IncompatibleError struct {
	File      string
	What      string
	Have, Got string // the checkpoint's value, this run's
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("checkpoint %s was written with %s %s, this run has %s (use another --checkpoint-dir)", e.File, e.What, e.Have, e.Got)
}

// Validate checks the hyperparameters.
func (c *Config) Validate() error {
	switch {
	case c.Epochs < 1:
		return fmt.Errorf("epochs %d: want at least 1", c.Epochs)
	case c.BatchSize < 1:
		return fmt.Errorf("batch size %d: want at least 1", c.BatchSize)
	case !(c.LR > 0) || math.IsInf(float64(c.LR), 0):
		return fmt.Errorf("learning rate %v: want a positive number", c.LR)
	case !(c.Momentum >= 0 && c.Momentum < 1):
		return fmt.Errorf("momentum %v: want 0 <= momentum < 1", c.Momentum)
	case !(c.WeightDecay >= 0) || math.IsInf(float64(c.WeightDecay), 0):
		return fmt.Errorf("weight decay %v: want a finite number >= 0", c.WeightDecay)
	case c.CheckEvery < 0 || c.CheckpointEvery < 0:
		return errors.New("check and checkpoint intervals must be >= 0")
	case c.BucketBytes < 0:
		return errBucketSize
	}
	return nil
}

// weightsHash is FNV-64a of p's bytes as two float64 of 32 bits each, exact,
// for an Allgather.
func weightsHash(p []float32, buf []byte) ([]byte, [2]float64) {
	buf = appendFloats(buf[:0], p)
	h := fnv.New64a()
	h.Write(buf)
	s := h.Sum64()
	return buf, [2]float64{float64(s >> 32), float64(uint32(s))}
}

// checkWeights compares every rank's weights with rank 0's.
func checkWeights(c Comm, p []float32, step int, scratch []byte) ([]byte, error) {
	scratch, mine := weightsHash(p, scratch)
	all := make([]float64, 2*c.Size())
	if err := c.Allgather(mine[:], all); err != nil {
		return scratch, fmt.Errorf("weight check: %w", err)
	}
	var bad []int
	for r := 1; r < c.Size(); r++ {
		if !slices.Equal(all[2*r:2*r+2], all[:2]) {
			bad = append(bad, r)
		}
	}
	if bad != nil {
		return scratch, &DivergedError{Step: step, Ranks: bad}
	}
	return scratch, nil
}
