package trainer

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Ranks given different settings or data are refused before the first
// step, every rank naming what differs (rank 0 all of it, the others their
// own). Before, different data of one shape trained without a word,
// different row counts failed at some step, and a different seed or
// hidden size was "the weights of rank(s) [1] differ".
func TestTrainRanksDisagree(t *testing.T) {
	train, test := digitsSplit(t)
	// The same shape, other values: the digits with one label changed.
	other := &Dataset{X: train.X, Y: append([]int32(nil), train.Y...), Features: train.Features, Classes: train.Classes}
	other.Y[0] = (other.Y[0] + 1) % 10
	fewer := &Dataset{X: train.X[:1200*train.Features], Y: train.Y[:1200], Features: train.Features, Classes: train.Classes}
	digitsPrint, otherPrint, fewerPrint := dataFingerprint(train, test), dataFingerprint(other, test), dataFingerprint(fewer, test)
	for _, tc := range []struct {
		name  string
		ranks int
		vary  func(rank int, c *Config) *Dataset // rank's config and train set
		want  []Disagreement
		rank1 string // rank 1's error
	}{
		{"--hidden", 2, func(r int, c *Config) *Dataset {
			c.Hidden = []int{64 >> r}
			return train
		}, []Disagreement{{1, "--hidden", "32", "64"}}, "the ranks were given different settings or data: rank 1: --hidden 32 (rank 0: 64)"},
		{"--seed and --lr on rank 2 of 3", 3, func(r int, c *Config) *Dataset {
			if r == 2 {
				c.Seed, c.LR = 2, 0.1
			}
			return train
		}, []Disagreement{{2, "--lr", "0.1", "0.05"}, {2, "--seed", "2", "1"}},
			"the ranks were given different settings or data (rank 0 names them): every rank must run the same train command on the same data"},
		{"data of the same shape", 2, func(r int, c *Config) *Dataset {
			if r == 1 {
				return other
			}
			return train
		}, []Disagreement{{1, "--data", otherPrint, digitsPrint}}, "the ranks were given different settings or data: rank 1: --data " + otherPrint + " (rank 0: " + digitsPrint + ")"},
		{"fewer rows, no hidden layer", 2, func(r int, c *Config) *Dataset {
			if r == 1 {
				c.Hidden = nil
				return fewer
			}
			return train
		}, []Disagreement{{1, "--hidden", `""`, "64"}, {1, "--data", fewerPrint, digitsPrint}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := 0
			_, errs := trainWorldData(tc.ranks, test, func(r int) (Config, *Dataset) {
				c := defaults()
				c.Epochs = 1
				d := tc.vary(r, &c)
				c.OnStep = func(StepInfo) error { steps++; return nil }
				return c, d
			})
			for r, err := range errs {
				var de *DisagreeError
				if !errors.As(err, &de) {
					t.Fatalf("rank %d: %v, want a DisagreeError", r, err)
				}
				if diff := cmp.Diff(tc.want, de.Diffs); diff != "" {
					t.Errorf("rank %d's differences (-want +got):\n%s", r, diff)
				}
			}
			if tc.rank1 != "" && errs[1].Error() != tc.rank1 {
				t.Errorf("rank 1 says %q, want %q", errs[1], tc.rank1)
			}
			if steps != 0 {
				t.Errorf("%d steps trained, want none", steps)
			}
		})
	}
}

// Ranks that agree train as before, whatever the checkpoint interval
// (only rank 0 writes).
func TestTrainRanksAgree(t *testing.T) {
	train, test := digitsSplit(t)
	_, errs := trainWorldData(2, test, func(r int) (Config, *Dataset) {
		c := defaults()
		c.Epochs, c.CheckpointEvery = 1, 10*r
		return c, train
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestGatherBytes(t *testing.T) {
	in := [][]byte{[]byte("rank 0"), nil, []byte("a longer one, \xff\x00 bytes")}
	w := NewLocalWorld(len(in))
	got := make([][][]byte, len(in))
	errs := make(chan error, len(in))
	for r := range in {
		go func() {
			var err error
			got[r], err = gatherBytes(w.Comms[r], in[r])
			errs <- err
		}()
	}
	for range in {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := [][]byte{[]byte("rank 0"), {}, []byte("a longer one, \xff\x00 bytes")}
	for r := range in {
		if diff := cmp.Diff(want, got[r]); diff != "" {
			t.Errorf("rank %d got (-want +got):\n%s", r, diff)
		}
	}
}
