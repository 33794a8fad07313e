package trainer

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// head is d's first n rows.
func head(d *Dataset, n int) *Dataset {
	return &Dataset{X: d.X[:n*d.Features], Y: d.Y[:n], Features: d.Features, Classes: d.Classes}
}

// N ranks with batch B end with the weights of 1 rank with batch N·B: with
// N·B dividing the rows there is no padding, and the DistributedSampler's
// interleaving makes step s's samples over all ranks exactly the 1-rank
// batch s. Only the order of float additions differs.
func TestDataParallelEqualsLargeBatch(t *testing.T) {
	train, test := digitsSplit(t)
	train = head(train, 1408) // 22 × 64
	for _, n := range []int{2, 4} {
		const b = 16
		cfg := defaults()
		cfg.Epochs = 2
		cfg.BatchSize = n * b
		one, errs := trainWorld(1, train, test, func(int) Config { return cfg })
		if errs[0] != nil {
			t.Fatal(errs[0])
		}
		cfg.BatchSize = b
		many, errs := trainWorld(n, train, test, func(int) Config { return cfg })
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if one[0].Steps != many[0].Steps {
			t.Fatalf("%d ranks: %d steps, 1 rank %d", n, many[0].Steps, one[0].Steps)
		}
		worst := 0.0
		for i, v := range one[0].Params {
			worst = max(worst, math.Abs(float64(v-many[0].Params[i])))
		}
		t.Logf("%d ranks × batch %d vs 1 rank × batch %d, %d steps: largest weight difference %.2g", n, b, n*b, one[0].Steps, worst)
		if worst > 1e-4 {
			t.Errorf("%d ranks: weights differ by up to %g from the 1-rank run", n, worst)
		}
	}
}

var errCrash = errors.New("crash")

// reference is an uninterrupted run's weights and last epoch.
func reference(t *testing.T, n int, cfg Config, train, test *Dataset) (string, EpochInfo) {
	t.Helper()
	var last EpochInfo
	res, errs := trainWorld(n, train, test, onRank0(cfg, func(e EpochInfo) error { last = e; return nil }))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return WeightsSHA256(res[0].Params), last
}

// A run killed at a random step (after its checkpoints, without a final one)
// and started again ends with the uninterrupted run's weights, bit for bit,
// and reports the same last epoch.
func TestResumeExact(t *testing.T) {
	train, test := digitsSplit(t)
	cfg := defaults()
	cfg.Epochs = 3
	want, wantEpoch := reference(t, 2, cfg, train, test)
	total := cfg.Epochs * StepsPerEpoch(train.Rows(), 2, cfg.BatchSize)
	rng := rand.New(rand.NewPCG(19, 0))
	for range 4 {
		every, crash := 1+rng.IntN(10), 2+rng.IntN(total-1)
		if crash <= every {
			crash = every + 1
		}
		cfg := cfg
		cfg.CheckpointDir, cfg.CheckpointEvery = t.TempDir(), every
		crashed := cfg
		crashed.OnStep = func(s StepInfo) error {
			if s.GlobalStep == crash {
				return errCrash
			}
			return nil
		}
		_, errs := trainWorld(2, train, test, func(int) Config { return crashed })
		if !errors.Is(errors.Join(errs...), errCrash) {
			t.Fatalf("crash run: %v", errs)
		}
		var last EpochInfo
		res, errs := trainWorld(2, train, test, onRank0(cfg, func(e EpochInfo) error { last = e; return nil }))
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		from := (crash - 1) / every * every
		if res[0].ResumedFrom != from || res[1].ResumedFrom != from {
			t.Errorf("checkpoint every %d, crash at step %d: resumed from %d, want %d", every, crash, res[0].ResumedFrom, from)
		}
		if got := WeightsSHA256(res[0].Params); got != want {
			t.Errorf("checkpoint every %d, crash at step %d: weights %s, uninterrupted %s", every, crash, got, want)
		}
		if diff := cmp.Diff(epochFigures(wantEpoch), epochFigures(last)); diff != "" {
			t.Errorf("crash at step %d: last epoch (-uninterrupted +resumed):\n%s", crash, diff)
		}
	}
}

// onRank0 is cfg for every rank, with onEpoch on rank 0 only.
func onRank0(cfg Config, onEpoch func(EpochInfo) error) func(int) Config {
	return func(rank int) Config {
		c := cfg
		if rank == 0 {
			c.OnEpoch = onEpoch
		}
		return c
	}
}

// epochFigures is an epoch's figures without the times.
func epochFigures(e EpochInfo) EpochInfo {
	e.SamplesPerSecond, e.Elapsed, e.Comm = 0, 0, CommStats{}
	return e
}

// A damaged newest checkpoint is reported and the one before it used.
func TestResumeCorruptFallsBack(t *testing.T) {
	train, test := digitsSplit(t)
	cfg := defaults()
	cfg.Epochs = 2
	want, _ := reference(t, 1, cfg, train, test)
	for _, damage := range []string{"truncate", "flip"} {
		t.Run(damage, func(t *testing.T) {
			cfg := cfg
			cfg.CheckpointDir, cfg.CheckpointEvery = t.TempDir(), 7
			cfg.OnStep = func(s StepInfo) error {
				if s.GlobalStep == 30 {
					return errCrash
				}
				return nil
			}
			trainWorld(1, train, test, func(int) Config { return cfg })
			files, _, _ := scanCheckpoints(cfg.CheckpointDir)
			var names []string
			for _, f := range files {
				names = append(names, f.path)
			}
			if len(names) != KeepCheckpoints || checkpointStep(filepath.Base(names[0])) != 28 {
				t.Fatalf("checkpoints %v, want the newest 3 up to step 28", names)
			}
			b, _ := os.ReadFile(names[0])
			if damage == "truncate" {
				b = b[:len(b)/2]
			} else {
				b[len(b)/2] ^= 1
			}
			os.WriteFile(names[0], b, 0o644)
			var warned []string
			cfg.OnStep = nil
			cfg.Warn = func(err error) { warned = append(warned, err.Error()) }
			res, errs := trainWorld(1, train, test, func(int) Config { return cfg })
			if errs[0] != nil {
				t.Fatal(errs[0])
			}
			if len(warned) != 1 || !strings.Contains(warned[0], names[0]) || !strings.Contains(warned[0], "checksum") {
				t.Errorf("warnings %q, want one naming %s and the checksum", warned, names[0])
			}
			if res[0].ResumedFrom != 21 || WeightsSHA256(res[0].Params) != want {
				t.Errorf("resumed from %d (want 21), weights equal the uninterrupted run's: %v", res[0].ResumedFrom, WeightsSHA256(res[0].Params) == want)
			}
		})
	}
}

// A checkpoint of another world size or model is refused, naming both.
func TestResumeIncompatible(t *testing.T) {
	train, test := digitsSplit(t)
	cfg := defaults()
	cfg.Epochs = 1
	cfg.CheckpointDir = t.TempDir()
	if _, errs := trainWorld(2, train, test, func(int) Config { return cfg }); errors.Join(errs...) != nil {
		t.Fatal(errs)
	}
	other := cfg
	other.Hidden = []int{32}
	for _, tc := range []struct {
		n    int
		cfg  Config
		want string
	}{
		{1, cfg, "world size 2, this run has 1"},
		{2, other, "model sizes [64 64 10], this run has [64 32 10]"},
	} {
		_, errs := trainWorld(tc.n, train, test, func(int) Config { return tc.cfg })
		var ie *IncompatibleError
		if !errors.As(errs[0], &ie) || !strings.Contains(ie.Error(), tc.want) || !strings.Contains(ie.Error(), cfg.CheckpointDir) {
			t.Errorf("error %v, want an IncompatibleError naming the file and %q", errs[0], tc.want)
		}
	}
}

// A stop asked of one rank stops all after the same step; rank 0 writes a
// checkpoint from which the run ends as an uninterrupted one.
func TestPreempt(t *testing.T) {
	train, test := digitsSplit(t)
	cfg := defaults()
	cfg.Epochs = 2
	want, _ := reference(t, 2, cfg, train, test)
	cfg.CheckpointDir = t.TempDir()
	var polls atomic.Int32
	_, errs := trainWorld(2, train, test, func(rank int) Config {
		c := cfg
		if rank == 1 {
			c.Stop = func() StopReason {
				if polls.Add(1) >= 17 {
					return Preempt
				}
				return NoStop
			}
		}
		return c
	})
	for r, err := range errs {
		var pe *PreemptedError
		if !errors.As(err, &pe) || pe.Step != 17 || pe.Reason != Preempt {
			t.Fatalf("rank %d: %v, want preempted after step 17", r, err)
		}
		if pe.Checkpoint != filepath.Join(cfg.CheckpointDir, "ckpt-0000000017.bkpt") {
			t.Errorf("rank %d: checkpoint %q", r, pe.Checkpoint)
		}
	}
	res, errs := trainWorld(2, train, test, func(int) Config { return cfg })
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if res[0].ResumedFrom != 17 || WeightsSHA256(res[0].Params) != want {
		t.Errorf("resumed from %d (want 17); weights equal the uninterrupted run's: %v", res[0].ResumedFrom, WeightsSHA256(res[0].Params) == want)
	}
}

// A cancel beats a preemption on every rank: asked of one rank in the same
// step as another's preemption, or only after the step that stopped the
// run (a SIGTERM just after a SIGUSR1, while the checkpoint is written).
// Without a checkpoint dir the stop names no file.
func TestStopCancelWins(t *testing.T) {
	train, test := digitsSplit(t)
	cfg := defaults()
	cfg.Epochs = 1
	for _, tc := range []struct {
		name string
		dir  bool
		// stop is rank r's answer to its n-th poll (1-based).
		stop func(r int, n int32) StopReason
		want StopReason
	}{
		{"preempt alone", true, func(r int, n int32) StopReason { return when(r == 1 && n >= 5, Preempt) }, Preempt},
		{"cancel alone", true, func(r int, n int32) StopReason { return when(r == 0 && n >= 5, Cancel) }, Cancel},
		{"cancel and preempt in one step", true, func(r int, n int32) StopReason {
			return when(n >= 5, map[int]StopReason{0: Preempt, 1: Cancel}[r])
		}, Cancel},
		{"cancel after the stopping step", true, func(r int, n int32) StopReason {
			switch {
			case r == 0 && n >= 5:
				return Preempt
			case r == 1 && n >= 6: // the poll after the checkpoint
				return Cancel
			}
			return NoStop
		}, Cancel},
		{"preempt without a checkpoint dir", false, func(r int, n int32) StopReason { return when(n >= 5, Preempt) }, Preempt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.dir {
				c.CheckpointDir = t.TempDir()
			}
			var polls [2]atomic.Int32
			_, errs := trainWorld(2, train, test, func(rank int) Config {
				c := c
				c.Stop = func() StopReason { return tc.stop(rank, polls[rank].Add(1)) }
				return c
			})
			for r, err := range errs {
				var pe *PreemptedError
				if !errors.As(err, &pe) || pe.Step != 5 || pe.Reason != tc.want {
					t.Fatalf("rank %d: %v, want %v after step 5", r, err, tc.want)
				}
				wantFile := ""
				if tc.dir {
					wantFile = filepath.Join(c.CheckpointDir, "ckpt-0000000005.bkpt")
				}
				if pe.Checkpoint != wantFile {
					t.Errorf("rank %d: checkpoint %q, want %q", r, pe.Checkpoint, wantFile)
				}
				if !strings.HasPrefix(pe.Error(), tc.want.String()+" after step 5") {
					t.Errorf("rank %d: message %q", r, pe.Error())
				}
			}
		})
	}
}

// when is s if cond, else NoStop.
func when(cond bool, s StopReason) StopReason {
	if cond {
		return s
	}
	return NoStop
}

// skewComm changes rank 1's averaged gradient once: the weights drift apart.
// The buffer's last element is a gradient's (the extras come first).
type skewComm struct {
	Comm
	calls int
}

func (s *skewComm) AllreduceSum(buf []float32) error {
	err := s.Comm.AllreduceSum(buf)
	if s.calls++; s.calls == 5 && s.Rank() == 1 {
		buf[len(buf)-1] += 1e-3
	}
	return err
}

func TestDivergedWeightsFail(t *testing.T) {
	train, test := digitsSplit(t)
	cfg := defaults()
	cfg.Epochs, cfg.CheckEvery = 1, 10
	w := NewLocalWorld(3)
	errs := make([]error, 3)
	done := make(chan struct{})
	for r := range 3 {
		go func() {
			_, errs[r] = Train(&skewComm{Comm: w.Comms[r]}, train, test, cfg)
			done <- struct{}{}
		}()
	}
	for range 3 {
		<-done
	}
	for r, err := range errs {
		var de *DivergedError
		if !errors.As(err, &de) || de.Step != 10 || !cmp.Equal(de.Ranks, []int{1}) {
			t.Errorf("rank %d: %v, want rank 1 diverged at step 10", r, err)
		}
	}
}
