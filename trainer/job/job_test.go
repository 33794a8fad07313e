package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer"
)

// Setup names the flag at fault, and every refusal is ErrInvalid.
func TestSetupRefuses(t *testing.T) {
	dir := t.TempDir()
	oneRow := filepath.Join(dir, "one.csv")
	if err := os.WriteFile(oneRow, []byte("1,2,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	with := func(f func(*Config)) Config { c := Defaults; f(&c); return c }
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"format", with(func(c *Config) { c.Format = "yaml" }), `invalid --format "yaml": want text or json`},
		{"backend", with(func(c *Config) { c.Backend = "nccl" }), `invalid --backend "nccl": want one of `},
		{"hidden", with(func(c *Config) { c.Hidden = "64,x" }), `invalid --hidden "64,x": "x" is not a positive layer size`},
		{"epochs", with(func(c *Config) { c.Epochs = 0 }), "invalid flags: epochs 0: want at least 1"},
		{"lr float32 cannot hold", with(func(c *Config) { c.LR = 1e-50 }), "invalid --lr 1e-50: too small for the float32 the training computes in"},
		{"weight decay float32 cannot hold", with(func(c *Config) { c.WeightDecay = 1e39 }), "invalid --weight-decay 1e+39: too large for the float32 the training computes in"},
		{"no data file", with(func(c *Config) { c.Data = filepath.Join(dir, "none.csv") }), "none.csv"},
		{"too little data", with(func(c *Config) { c.Data = oneRow }), "invalid --data " + oneRow + ": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.Setup()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid) {
				t.Errorf("Setup() = %v, want an ErrInvalid saying %q", err, tc.want)
			}
		})
	}
}

// Run on two in-process ranks: rank 0 alone prints the summary and writes
// one metrics line per epoch, of this run's id; the weights agree.
func TestRun(t *testing.T) {
	metrics := filepath.Join(t.TempDir(), "m.jsonl")
	cfg := Defaults
	cfg.Epochs, cfg.Format, cfg.Metrics = 2, "json", metrics
	w := trainer.NewLocalWorld(2)
	var outs, errs [2]bytes.Buffer
	var runErr [2]error
	var wg sync.WaitGroup
	for r := range 2 {
		s, err := cfg.Setup()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Check(topology.Topology{Rank: r, WorldSize: 2}, &outs[r], &errs[r]); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runErr[r] = Run(w.Comms[r], "local", s, Output{Stdout: &outs[r], Stderr: &errs[r]}, func() trainer.StopReason { return trainer.NoStop })
			if runErr[r] != nil {
				w.Abort()
			}
		}()
	}
	wg.Wait()
	for r, err := range runErr {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if outs[1].Len() != 0 {
		t.Errorf("rank 1 printed %q, want nothing", outs[1].String())
	}
	var sum Summary
	if err := json.Unmarshal(outs[0].Bytes(), &sum); err != nil {
		t.Fatalf("rank 0's output %q: %v", outs[0].String(), err)
	}
	if sum.Epochs != 2 || sum.WorldSize != 2 || sum.Backend != "local" || sum.TestAccuracy == nil || *sum.TestAccuracy < 0.5 {
		t.Errorf("summary %+v: want 2 epochs on 2 ranks of local, accuracy over 0.5", sum)
	}
	b, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := cfg.Setup()
	run := RunID(s.Sizes, s.TrainSet, 2, s.Train.BatchSize, s.Train.Seed)
	var got []metricsKey
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if k, ok := parseMetricsLine(line); ok {
			got = append(got, k)
		}
	}
	if diff := cmp.Diff([]metricsKey{{run, 1}, {run, 2}}, got); diff != "" {
		t.Errorf("metrics lines (-want +got):\n%s", diff)
	}
}
