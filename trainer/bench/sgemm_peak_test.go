package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The FP32 peak script of make bench-train (reference/sgemm_peak.py) runs on
// Debian's python3 here, with its python3-torch, which make test installs;
// without torch the measuring test skips (make bench-train installs it).
const (
	peakScript = "reference/sgemm_peak.py"
	peakPython = "/usr/bin/python3"
)

// TestSgemmPeakLines: one JSON line per product and thread count, in order
// (each product checked against float64 first, or the script fails),
// each timed at least three times, its median call no faster than its best.
func TestSgemmPeakLines(t *testing.T) {
	var stderr bytes.Buffer
	cmd := exec.Command(peakPython, peakScript, "--libs", "torch", "--threads", "1",
		"--shapes", "64x32x16,8x8x8", "--seconds", "0.01")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if strings.Contains(stderr.String(), "No module named 'torch'") {
		t.Skipf("%s has no torch (apt-get install python3-torch)", peakPython)
	}
	if err != nil {
		t.Fatalf("sgemm_peak.py: %v: %s", err, stderr.String())
	}
	type key struct{ Lib, M, N, K, Threads any }
	var got, want []key
	for _, s := range []struct{ m, n, k, th int }{{64, 32, 16, 1}, {8, 8, 8, 1}} {
		want = append(want, key{"torch", float64(s.m), float64(s.n), float64(s.k), float64(s.th)})
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got = append(got, key{r["lib"], r["m"], r["n"], r["k"], r["threads"]})
		best, med, calls := r["gflops_best"].(float64), r["gflops_median"].(float64), r["calls"].(float64)
		if calls < 3 || !(best > 0) || med > best {
			t.Errorf("line %q: want calls >= 3 and 0 < gflops_median <= gflops_best", line)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("products (-want +got):\n%s", diff)
	}
}

// TestSgemmPeakBadInput: a malformed flag is a usage error, exit 2, with a
// message naming the flag, before any library is imported.
func TestSgemmPeakBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"shape of two sizes", []string{"--shapes", "3x3"}, "--shapes"},
		{"zero threads", []string{"--threads", "0", "--shapes", "3x3x3"}, "--threads"},
		{"unknown library", []string{"--libs", "blis", "--shapes", "3x3x3"}, "--libs: unknown library 'blis'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(peakPython, append([]string{peakScript}, tc.args...)...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("exit: %v, want status 2", err)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q does not name %q", stderr.String(), tc.want)
			}
		})
	}
}
