package trainer

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A run whose loss becomes NaN or infinite stops there on every rank, at
// the same step, with a *NonFiniteError saying where; everything reported
// before is finite, and OnEnd gets what the run got to. A batch of 1 at
// the default rate diverges in the first epoch; --lr 2 on 2 ranks in the eighth.
func TestTrainStopsOnDivergence(t *testing.T) {
	train, test := digitsSplit(t)
	for _, tc := range []struct {
		name  string
		ranks int
		cfg   func(*Config)
		want  Divergence
	}{
		{"batch 1", 1, func(c *Config) { c.BatchSize = 1 }, Divergence{Step: 812, Epoch: 1, What: "loss", Value: "NaN"}},
		{"lr 2, 2 ranks", 2, func(c *Config) { c.LR = 2 }, Divergence{Step: 183, Epoch: 8, What: "loss", Value: "+Inf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaults()
			tc.cfg(&cfg)
			cfg.CheckpointDir, cfg.CheckpointEvery = t.TempDir(), 10
			var (
				ends    []Result
				nonNums []string
			)
			_, errs := trainWorld(tc.ranks, train, test, func(r int) Config {
				c := cfg
				c.OnStep = func(s StepInfo) error {
					if math.IsNaN(s.Loss) || math.IsInf(s.Loss, 0) {
						nonNums = append(nonNums, "step loss")
					}
					return nil
				}
				c.OnEpoch = func(e EpochInfo) error {
					for _, v := range []float64{e.Loss, e.TrainAcc, e.TestLoss, e.TestAcc, e.SamplesPerSecond} {
						if math.IsNaN(v) || math.IsInf(v, 0) {
							nonNums = append(nonNums, "epoch figure")
						}
					}
					return nil
				}
				if r == 0 {
					c.OnEnd = func(res Result) error { ends = append(ends, res); return nil }
				}
				return c
			})
			for r, err := range errs {
				var nf *NonFiniteError
				if !errors.As(err, &nf) {
					t.Fatalf("rank %d: %v, want a NonFiniteError", r, err)
				}
				if diff := cmp.Diff(tc.want, nf.Divergence); diff != "" {
					t.Errorf("rank %d diverged (-want +got):\n%s", r, diff)
				}
			}
			if nonNums != nil {
				t.Errorf("reported numbers that are not: %v", nonNums)
			}
			if len(ends) != 1 || ends[0].Diverged == nil || *ends[0].Diverged != tc.want || ends[0].Steps != tc.want.Step ||
				ends[0].Epochs != tc.want.Epoch-1 || ends[0].Params != nil {
				t.Errorf("OnEnd got %+v, want the run up to step %d once", ends, tc.want.Step)
			}
			ck, path, err := LoadLatestCheckpoint(cfg.CheckpointDir, nil)
			if err != nil || ck == nil || ck.Header.GlobalStep >= tc.want.Step || ck.Header.GlobalStep < tc.want.Step-10 {
				t.Errorf("newest checkpoint %s (%v): want one from the 10 steps before %d", path, err, tc.want.Step)
			}
		})
	}
}

// A checkpoint of weights that are not numbers is refused, not written.
func TestEncodeRefusesNonFinite(t *testing.T) {
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		ck := &Checkpoint{Params: []float32{1, v}, Momentum: []float32{0, 0}}
		if _, err := ck.Encode(); err == nil || !strings.Contains(err.Error(), "not all finite") {
			t.Errorf("Encode of a weight %v: %v, want a refusal", v, err)
		}
		ck.Params, ck.Momentum = ck.Momentum, ck.Params
		if _, err := ck.Encode(); err == nil {
			t.Errorf("Encode of a momentum %v: nil error, want a refusal", v)
		}
	}
}

// Weights that overflow in the update while the loss is still finite end
// the run as diverged in "weights": the update reports them (SGD.Step),
// the loop no longer scans the weights itself. The digits' first pixel is
// 0 in every image, so a weight from it leaves the loss alone; its momentum
// set to -MaxFloat32 pushes it from MaxFloat32 past the largest float32.
func TestTrainStopsOnNonFiniteWeights(t *testing.T) {
	train, test := digitsSplit(t)
	for i := range train.Rows() {
		if train.Row(i)[0] != 0 {
			t.Fatalf("sample %d's first feature is %g: the test needs a feature that is 0 throughout", i, train.Row(i)[0])
		}
	}
	cfg := defaults()
	m, err := NewMLP(train.Features, cfg.Hidden, 10)
	if err != nil {
		t.Fatal(err)
	}
	r := newRun(NewLocalWorld(1).Comms[0], m, train, test, cfg)
	r.params[0], r.opt.Buf[0] = math.MaxFloat32, -math.MaxFloat32 // layer 0's weight from feature 0 to unit 0
	_, err = r.step([]int{0, 1, 2, 3})
	var nf *NonFiniteError
	if !errors.As(err, &nf) {
		t.Fatalf("step: %v, want a NonFiniteError", err)
	}
	if want := (Divergence{Step: 1, Epoch: 1, What: "weights", Value: "+Inf"}); nf.Divergence != want {
		t.Errorf("diverged at %+v, want %+v", nf.Divergence, want)
	}
}
