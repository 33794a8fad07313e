package trainer

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStepsPerEpoch(t *testing.T) {
	for _, tc := range []struct {
		name               string
		n, world, batch    int
		steps, shard, rows int
	}{
		{"digits, 1 rank", 1438, 1, 32, 45, 1438, 32},
		{"digits, 2 ranks", 1438, 2, 32, 23, 719, 32},
		{"a batch of the whole shard", 1438, 2, 719, 1, 719, 719},
		{"a batch larger than the shard", 1438, 2, 100000000, 1, 719, 719},
		{"the largest batch (no overflow)", 1438, 1, math.MaxInt, 1, 1438, 1438},
		{"no rows", 0, 2, 32, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := []int{StepsPerEpoch(tc.n, tc.world, tc.batch), ShardSize(tc.n, tc.world), stepRows(tc.n, tc.world, tc.batch)}
			if diff := cmp.Diff([]int{tc.steps, tc.shard, tc.rows}, got); diff != "" {
				t.Errorf("steps, shard, rows of a step (-want +got):\n%s", diff)
			}
		})
	}
}

// A batch larger than a rank's shard trains on the whole shard a step, as
// a batch of exactly the shard does, and allocates for that: --batch-size
// 9000000000000000000 panicked in makeslice, 100000000 tried 25.6 GB.
func TestTrainBatchBoundedByShard(t *testing.T) {
	train, test := digitsSplit(t)
	cfg := defaults()
	cfg.Epochs = 2
	var want [2]string
	for i, batch := range []int{719, 9000000000000000000} {
		c := cfg
		c.BatchSize = batch
		res, errs := trainWorld(2, train, test, func(int) Config { return c })
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("batch %d: %v", batch, errs)
		}
		if res[0].Steps != 2 {
			t.Errorf("batch %d: %d steps, want 2 (one an epoch)", batch, res[0].Steps)
		}
		want[i] = WeightsSHA256(res[0].Params)
	}
	if want[0] != want[1] {
		t.Errorf("a batch of 9e18 ended with other weights than a batch of the whole shard")
	}
}

func TestMemoryNeed(t *testing.T) {
	train, test := digitsSplit(t)
	const mib = 1 << 20
	for _, tc := range []struct {
		name     string
		hidden   []int
		batch    int
		world    int
		ckpt     bool
		min, max int64 // bytes
	}{
		// The default run measures ~20 MB resident.
		{"the default model", []int{64}, 32, 1, false, 24 * mib, 26 * mib},
		// Measured 679 MB resident (1 rank, --batch-size 512), 826 MB with checkpoints.
		{"--hidden 4000,4000", []int{4000, 4000}, 512, 1, false, 700 * mib, 760 * mib},
		{"--hidden 4000,4000 with checkpoints", []int{4000, 4000}, 512, 1, true, 960 * mib, 1020 * mib},
		// The issue measured 10.6 GB a rank.
		{"--hidden 16000,16000", []int{16000, 16000}, 32, 2, false, 10800 * mib, 11000 * mib},
		{"a batch of 9e18 costs the shard's rows", []int{64}, 9000000000000000000, 2, false, 24 * mib, 26 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaults()
			cfg.Hidden, cfg.BatchSize = tc.hidden, tc.batch
			if tc.ckpt {
				cfg.CheckpointDir = "ckpt"
			}
			m, err := NewMLP(train.Features, tc.hidden, train.Classes)
			if err != nil {
				t.Fatal(err)
			}
			if got := MemoryNeed(m, train, test, cfg, tc.world); got < tc.min || got > tc.max {
				t.Errorf("MemoryNeed = %d MiB, want %d to %d MiB", got/mib, tc.min/mib, tc.max/mib)
			}
		})
	}
}

func TestCheckMemory(t *testing.T) {
	train, test := digitsSplit(t)
	const gib = int64(1) << 30
	for _, tc := range []struct {
		name   string
		hidden []int
		batch  int
		ranks  int
		avail  int64
		want   string // "" = accepted
	}{
		{"the default model", []int{64}, 32, 8, 1 * gib, ""},
		{"unknown memory", []int{16000, 16000}, 32, 8, 0, ""},
		{"--hidden 16000,16000 on one rank", []int{16000, 16000}, 32, 1, 20 * gib, ""},
		{"--hidden 16000,16000 on two ranks", []int{16000, 16000}, 32, 2, 20 * gib,
			"not enough memory for MLP 64-16000-16000-10 (257216010 parameters, 32 rows a step): the model, a step and the data take 10.63 GiB per rank, 21.27 GiB for the 2 ranks on this node, and this node has 20 GiB available"},
		{"a batch of 9e18 is the shard's", []int{64}, 9000000000000000000, 2, 1 * gib, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaults()
			cfg.Hidden, cfg.BatchSize = tc.hidden, tc.batch
			got := ""
			if err := CheckMemory(train, test, cfg, 2, tc.ranks, tc.avail); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CheckMemory (-want +got):\n%s", diff)
			}
		})
	}
	cfg := defaults()
	cfg.Hidden = []int{1 << 20, 1 << 20}
	if err := CheckMemory(train, test, cfg, 1, 1, 64*gib); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a model over MaxParams: %v", err)
	}
}
