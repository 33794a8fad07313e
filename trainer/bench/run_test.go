package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective"
	"github.com/batchkit/batchkit/trainer/health"
)

var single = topology.Topology{Launcher: topology.Single, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1}

func selfWorld(t *testing.T, fallback bool) *collective.Comm {
	t.Helper()
	c, err := collective.Init(collective.Config{Topology: single, Fallback: fallback})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A world of one (the self backend, natively and through the
// Allreduce-based fallbacks): every op and dtype measures and checks every
// size, rank 0 writes one JSON line per size that reads back as written.
func TestRunSelf(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		for _, op := range Collectives {
			for _, dt := range []collective.DType{collective.Float32, collective.Float64} {
				c := selfWorld(t, fallback)
				var out bytes.Buffer
				opts := Options{Op: op, DType: dt, MinBytes: 4, MaxBytes: 256 << 10, Iters: 3, Format: JSON, Label: "x", Settle: time.Millisecond}
				results, err := Run(c, &out, opts)
				if err != nil {
					t.Fatalf("fallback %v, %s %s: %v", fallback, op, dt, err)
				}
				c.Close()
				wantSizes := Sizes(op, dt, 1, 4, 256<<10)
				var sizes []int64
				for _, r := range results {
					sizes = append(sizes, r.Bytes)
					if r.Op != string(op) || r.Backend != "self" || r.DType != dt.String() || r.Ranks != 1 ||
						r.Iters != 3 || r.Warmup != 1 || r.Count != r.Bytes/int64(dt.Size()) || r.Label != "x" || r.MPILibrary != "" {
						t.Errorf("%s %s: result %+v", op, dt, r)
					}
					if !(r.MinUs <= r.AvgUs && r.AvgUs <= r.MaxUs) || r.AvgUs <= 0 {
						t.Errorf("%s %s: times min %v avg %v max %v", op, dt, r.MinUs, r.AvgUs, r.MaxUs)
					}
					if r.BusBW != r.AlgBW { // one rank: busbw = algbw
						t.Errorf("%s %s: busbw %v != algbw %v on one rank", op, dt, r.BusBW, r.AlgBW)
					}
				}
				if diff := cmp.Diff(wantSizes, sizes); diff != "" {
					t.Errorf("%s %s sizes (-want +got):\n%s", op, dt, diff)
				}
				back, err := ReadResults(&out, "output")
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(results, back); diff != "" {
					t.Errorf("%s %s: output read back (-returned +read):\n%s", op, dt, diff)
				}
			}
		}
	}
}

// The settle phase runs before the first size for at least Settle (default
// SettleTime), and not at all when it is negative.
func TestRunSettle(t *testing.T) {
	if got := (Options{}).withDefaults().Settle; got != SettleTime {
		t.Errorf("default Settle = %v, want SettleTime %v", got, SettleTime)
	}
	for _, tc := range []struct {
		settle   time.Duration
		min, max time.Duration
	}{
		{settle: 80 * time.Millisecond, min: 80 * time.Millisecond, max: 10 * time.Second},
		{settle: -1, min: 0, max: 60 * time.Millisecond},
	} {
		c := selfWorld(t, false)
		t0 := time.Now()
		if _, err := Run(c, nil, Options{MinBytes: 8, MaxBytes: 8, Iters: 1, Settle: tc.settle}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d < tc.min || d > tc.max {
			t.Errorf("Settle %v: Run took %v, want %v..%v", tc.settle, d, tc.min, tc.max)
		}
		c.Close()
	}
}

func TestRunText(t *testing.T) {
	c := selfWorld(t, false)
	var out, bar bytes.Buffer
	_, err := Run(c, &out, Options{MinBytes: 8, MaxBytes: 64, Iters: 2, Progress: &bar})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3+4 {
		t.Fatalf("text output has %d lines, want 3 header lines and 4 rows:\n%s", len(lines), out.String())
	}
	if lines[0] != "# allreduce float32, 1 rank, backend self" {
		t.Errorf("header %q", lines[0])
	}
	for _, l := range lines[3:] {
		if f := strings.Fields(l); len(f) != 10 || f[3] != "2" {
			t.Errorf("row %q: want 10 fields (size is two), iters 2", l)
		}
	}
	if !strings.Contains(bar.String(), "allreduce 64 B") {
		t.Errorf("progress bar output %q does not name the size", bar.String())
	}
}

func TestRunErrors(t *testing.T) {
	c := selfWorld(t, false)
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Op: "reduce"}, `unknown op "reduce"`},
		{Options{Format: "yaml"}, `unknown format "yaml"`},
		{Options{MinBytes: 16, MaxBytes: 8}, "bad size range 16..8 bytes"},
		{Options{MinBytes: 1, MaxBytes: MaxSize + 1}, "bad size range"},
		{Options{MinBytes: 1, MaxBytes: 3}, "no message sizes to run: allreduce of float32 on 1 rank needs multiples of 4 bytes, and 1 B..3 B has none"},
	} {
		var out bytes.Buffer
		_, err := Run(c, &out, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, want an error containing %q", tc.opts, err, tc.want)
		}
		if out.Len() > 0 {
			t.Errorf("Run(%+v) wrote %q before failing", tc.opts, out.String())
		}
	}
	if _, err := Run(c, &bytes.Buffer{}, Options{MinBytes: 1, MaxBytes: 3}); !errors.Is(err, ErrNoSizes) {
		t.Errorf("empty sweep: %v, want ErrNoSizes", err)
	}
}

// --report: after the rows, rank 0 writes the health report, one
// {"health": ...} line in JSON that ReadResults skips, or its text; the
// iterations counted are the timed ones.
func TestRunReport(t *testing.T) {
	for _, format := range []Format{JSON, Text} {
		c := selfWorld(t, false)
		var out bytes.Buffer
		opts := Options{MinBytes: 8, MaxBytes: 64, Iters: 3, Format: format, Settle: -1, Report: true, Node: "vm"}
		results, err := Run(c, &out, opts)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		last := lines[len(lines)-1]
		if format == Text {
			if last != "health: one rank: nothing to compare" || !strings.Contains(out.String(), "\n\nhealth: per rank, seconds over 12 steps (") {
				t.Errorf("text output %q: want the health report after a blank line", out.String())
			}
			continue
		}
		var h struct{ Health health.Report }
		if err := json.Unmarshal([]byte(last), &h); err != nil {
			t.Fatalf("last line %q: %v", last, err)
		}
		if r := h.Health.Ranks; len(r) != 1 || r[0].Node != "vm" || r[0].Steps != 4*3 || !(r[0].Comm > 0) || r[0].Compute != 0 {
			t.Errorf("health ranks %+v: want rank 0 on vm, 12 timed operations, their time as comm", r)
		}
		back, err := ReadResults(&out, "output")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(results, back); diff != "" {
			t.Errorf("output read back (-returned +read):\n%s", diff)
		}
	}
}
