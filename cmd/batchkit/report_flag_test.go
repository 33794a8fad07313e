package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --report is for a run: bench given result files refuses it, exit 2, and
// leaves the file as it was.
func TestBenchReportNeedsARun(t *testing.T) {
	file := filepath.Join(t.TempDir(), "r.jsonl")
	line := `{"op":"allreduce","backend":"tcp","dtype":"float32","ranks":2,"bytes":8,"iters":1,"avg_us":1,"algbw_gbs":1,"busbw_gbs":1}` + "\n"
	if err := os.WriteFile(file, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stderr := runMain(t, "bench", "--report", file)
	if want := "--report is for a run"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("bench --report FILE: exit %d, %q; want 2 and %q", code, stderr, want)
	}
	if b, _ := os.ReadFile(file); string(b) != line {
		t.Errorf("the result file became %q", b)
	}
}
