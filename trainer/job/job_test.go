package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/envsetup"
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
		{"negative bucket", with(func(c *Config) { c.BucketMB = "-1" }), `invalid --bucket-mb "-1": want auto or a size in MiB >= 0 (0: one allreduce after the backward pass)`},
		{"NaN bucket", with(func(c *Config) { c.BucketMB = "NaN" }), `invalid --bucket-mb "NaN": `},
		{"bucket with a unit", with(func(c *Config) { c.BucketMB = "25MB" }), `invalid --bucket-mb "25MB": `},
		{"no data file", with(func(c *Config) { c.Data = filepath.Join(dir, "none.csv") }), "none.csv"},
		{"too little data", with(func(c *Config) { c.Data = oneRow }), "invalid --data " + oneRow + ": "},
		{"blas", with(func(c *Config) { c.BLAS = "atlas" }), `invalid --blas "atlas": want one of auto, mkl, openblas, gonum`},
		{"OMP_NUM_THREADS", with(func(c *Config) { c.Getenv = ompThreads("0") }), `OMP_NUM_THREADS="0" is not a thread count: want a positive integer`},
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

// runWorld runs cfg on n in-process ranks (rank r on node nodes[r]) and
// returns their stdout.
func runWorld(t *testing.T, cfg Config, nodes []string) []string {
	t.Helper()
	n := len(nodes)
	w := trainer.NewLocalWorld(n)
	outs, errs := make([]bytes.Buffer, n), make([]bytes.Buffer, n)
	runErr := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		s, err := cfg.Setup()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Check(topology.Topology{Rank: r, WorldSize: n}, &outs[r], &errs[r]); err != nil {
			t.Fatal(err)
		}
		s.Node = nodes[r]
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
	var got []string
	for r, err := range runErr {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		got = append(got, outs[r].String())
	}
	return got
}

// --report: the summary object has the health report, a row per rank and
// per node with every step timed and each rank's links measured (the
// broadcast and the ring links out and in), the ring's links listed; the
// text ends with it.
func TestRunReport(t *testing.T) {
	cfg := Defaults
	cfg.Epochs, cfg.Format, cfg.Report = 1, "json", true
	outs := runWorld(t, cfg, []string{"node1", "node2", "node2"})
	var sum Summary
	if err := json.Unmarshal([]byte(outs[0]), &sum); err != nil {
		t.Fatalf("rank 0's output %q: %v", outs[0], err)
	}
	h := sum.Health
	if h == nil || len(h.Ranks) != 3 || len(h.Nodes) != 2 {
		t.Fatalf("health %+v: want 3 ranks on 2 nodes", h)
	}
	for r, x := range h.Ranks {
		if x.Rank != r || x.Steps != sum.Steps || !(x.Compute > 0) || !(x.Comm > 0) || !(x.LinkGBs > 0) || !(x.ToNextGBs > 0) || !(x.FromPrevGBs > 0) {
			t.Errorf("rank row %+v: want rank %d, %d steps, compute, comm and links measured", x, r, sum.Steps)
		}
	}
	for i, l := range h.Links {
		if l.From != i || l.To != (i+1)%3 || !(l.GBs > 0) || l.Error != "" {
			t.Errorf("ring link %+v: want %d → %d measured", l, i, (i+1)%3)
		}
	}
	if len(h.Links) != 3 || h.Links[0].FromNode != "node1" || h.Links[0].ToNode != "node2" {
		t.Errorf("ring links %+v: want 3, the first node1 → node2", h.Links)
	}
	if diff := cmp.Diff([]int{1, 2}, h.Nodes[1].Ranks); diff != "" || h.Nodes[1].Node != "node2" {
		t.Errorf("node rows %+v: want node2 with ranks 1, 2", h.Nodes)
	}
	if outs[1] != "" || outs[2] != "" {
		t.Errorf("ranks 1, 2 printed %q: want nothing", outs[1:])
	}

	cfg.Format = "text"
	text := runWorld(t, cfg, []string{"vm", "vm"})[0]
	if !strings.Contains(text, "\nhealth: per rank, seconds over ") || strings.Contains(text, "per node") {
		t.Errorf("text output %q: want the per-rank table and no node table (one node)", text)
	}

	cfg.Report = false
	if text := runWorld(t, cfg, []string{"vm", "vm"})[0]; strings.Contains(text, "health") {
		t.Errorf("without --report: %q", text)
	}
}

func TestBuckets(t *testing.T) {
	const tooFew = "one allreduce after the backward pass (--bucket-mb auto: a rank has 1 CPU, none to overlap on)"
	for _, tc := range []struct {
		flag, backend string
		fewest        int // CPUs of the rank with the fewest; 0: unknown
		want          int
		line          string
	}{
		{"auto", "tcp", 2, 1 << 20, "gradient buckets of 1 MiB (--bucket-mb auto)"},
		{"auto", "mpi", 4, 1 << 20, "gradient buckets of 1 MiB (--bucket-mb auto)"}, // AllreduceIdle: the buckets' calls leave the core to backward
		{"auto", "ccl", 0, 1 << 20, "gradient buckets of 1 MiB (--bucket-mb auto)"}, // no rank could read its mask: DDP's default
		{"auto", "tcp", 1, 0, tooFew},
		{"auto", "ccl", 1, 0, tooFew},
		{"auto", "self", 8, 0, "one allreduce after the backward pass (--bucket-mb auto on self)"},
		{"0", "tcp", 8, 0, "one allreduce after the backward pass (--bucket-mb 0)"},
		{"2", "mpi", 1, 2 << 20, "gradient buckets of 2 MiB (--bucket-mb 2)"}, // the user's size, whatever the CPUs
		{"0.5", "ccl", 8, 1 << 19, "gradient buckets of 0.5 MiB (--bucket-mb 0.5)"},
		{"0.000001", "tcp", 8, 2, "gradient buckets of 1.907e-06 MiB (--bucket-mb 0.000001)"}, // never 0 bytes: that would turn the buckets off
	} {
		t.Run(fmt.Sprintf("%s on %s, %d CPUs", tc.flag, tc.backend, tc.fewest), func(t *testing.T) {
			c := Defaults
			c.BucketMB = tc.flag
			s, err := c.Setup()
			if err != nil {
				t.Fatal(err)
			}
			got, line := s.Buckets(tc.backend, tc.fewest)
			if got != tc.want || line != tc.line {
				t.Errorf("Buckets = %d, %q; want %d, %q", got, line, tc.want, tc.line)
			}
		})
	}
}

// --bucket-mb auto is decided by the rank with the fewest CPUs, the same on
// every rank (the trainer compares the resolved size before the first
// step); a rank given another --bucket-mb still meets the others in the
// gather and is named by that comparison, not left hanging.
func TestBucketsAgreeAcrossRanks(t *testing.T) {
	mask := func(allowed int) func() (envsetup.CPUSet, error) {
		return func() (envsetup.CPUSet, error) {
			set := envsetup.CPUSet{Online: 8}
			for id := range allowed {
				set.Allowed = append(set.Allowed, envsetup.CPU{ID: id, Core: id})
			}
			return set, nil
		}
	}
	run := func(flags []string, cpus []int) (outs []string, errs []error) {
		n := len(flags)
		w := trainer.NewLocalWorld(n)
		outs, errs = make([]string, n), make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			c := Defaults
			c.Epochs, c.BucketMB = 1, flags[r]
			s, err := c.Setup()
			if err != nil {
				t.Fatal(err)
			}
			s.readCPUs = mask(cpus[r])
			if err := s.Check(topology.Topology{Rank: r, WorldSize: n, LocalWorldSize: 1}, io.Discard, io.Discard); err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out bytes.Buffer
				errs[r] = Run(w.Comms[r], "tcp", s, Output{Stdout: &out, Stderr: io.Discard}, func() trainer.StopReason { return trainer.NoStop })
				if errs[r] != nil {
					w.Abort()
				}
				outs[r] = out.String()
			}()
		}
		wg.Wait()
		return outs, errs
	}
	for _, tc := range []struct {
		name string
		cpus []int
		line string
	}{
		{"a rank with 1 CPU", []int{4, 1}, "train: one allreduce after the backward pass (--bucket-mb auto: a rank has 1 CPU, none to overlap on)\n"},
		{"2 CPUs each", []int{2, 2}, "train: gradient buckets of 1 MiB (--bucket-mb auto)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs, errs := run([]string{"auto", "auto"}, tc.cpus)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			if !strings.Contains(outs[0], tc.line) {
				t.Errorf("rank 0's output lacks %q:\n%s", tc.line, outs[0])
			}
		})
	}
	t.Run("another --bucket-mb on one rank", func(t *testing.T) {
		_, errs := run([]string{"auto", "0"}, []int{2, 2})
		if errs[0] == nil || !strings.Contains(errs[0].Error(), "--bucket-mb") {
			t.Errorf("rank 0: %v, want the ranks' --bucket-mb named", errs[0])
		}
	})
}
