package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/internal/fulldisk"
	"github.com/batchkit/batchkit/trainer/job"
)

// The summary comes before what can still fail: a final checkpoint that
// cannot be written (the disk filled: a 64 KiB tmpfs holds the lock and
// the checkpoint of step 100, not the final one's) fails the run, exit 1,
// after the summary, which is not lost.
func TestTrainSummaryBeforeFinalCheckpoint(t *testing.T) {
	dir := fulldisk.Tmpfs(t, 64<<10)
	code, out, errOut := runTrain(nil, "--epochs", "3", "--checkpoint-every", "100", "--checkpoint-dir", dir, "--format", "json")
	if code != 1 || !strings.Contains(errOut, "checkpoint at step 135") || !strings.Contains(errOut, "no space left on device") {
		t.Errorf("exit %d, stderr %q; want 1 and the final checkpoint's ENOSPC", code, errOut)
	}
	var s job.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Steps != 135 || s.WeightsSHA256 == "" {
		t.Errorf("stdout %q (%v): want the summary of 135 steps", out, err)
	}
}

// Destinations are checked before the first step: a --plot or --metrics
// on a full file system, a --checkpoint-dir with room for its lock but not
// for a checkpoint, is refused in one line, exit 2, with nothing trained.
func TestTrainRefusesFullDestinations(t *testing.T) {
	full := fulldisk.Mount(t)
	small := fulldisk.Tmpfs(t, 16<<10)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"plot", []string{"--plot", filepath.Join(full, "p.png")}, `batchkit: invalid --plot "` + full + `/p.png": no space left on the file system of ` + full + ": 0 B free, 257.41 KiB needed\n"},
		{"metrics", []string{"--metrics", filepath.Join(full, "m.jsonl")}, `batchkit: invalid --metrics "` + full + `/m.jsonl": no space left on the file system of ` + full + ": 0 B free, 512 B needed\n"},
		{"checkpoint dir", []string{"--checkpoint-dir", filepath.Join(small, "ck")}, "batchkit: cannot use checkpoint directory " + small + "/ck: no space left on the file system of " + small + "/ck: 12 KiB free, 38.14 KiB needed\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runTrain(nil, tc.args...)
			if code != 2 || errOut != tc.want {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
			if strings.Contains(out, "epoch") {
				t.Errorf("trained: %q", out)
			}
		})
	}
}

// A diverging run (--batch-size 1 at the default rate: NaN at step 812)
// ended with "json: unsupported value: NaN", exit 1, no summary, and
// --metrics stopped it after epoch 1. Now it stops at that step, says so
// in one line and in the summary, which is valid JSON like every metrics
// line, and exits 65.
func TestTrainDivergenceIsReported(t *testing.T) {
	metrics := filepath.Join(t.TempDir(), "m.jsonl")
	code, out, errOut := runTrain(nil, "--epochs", "3", "--batch-size", "1", "--format", "json", "--metrics", metrics)
	if code != exitDiverged {
		t.Errorf("exit %d, want %d", code, exitDiverged)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if !strings.HasPrefix(l, "epoch ") && !strings.HasPrefix(l, "train: ") {
			lines = append(lines, l)
		}
	}
	want := []string{"batchkit: training diverged at step 812 (epoch 1): the loss became NaN; a smaller learning rate or a larger batch may help"}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(out), &s); err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("stdout %q: %v, want one JSON object", out, err)
	}
	wantSummary := map[string]any{"test_accuracy": nil, "test_loss": nil, "epochs": 0.0, "steps": 812.0,
		"diverged": map[string]any{"step": 812.0, "epoch": 1.0, "what": "loss", "value": "NaN"}}
	for k, v := range wantSummary {
		if diff := cmp.Diff(v, s[k]); diff != "" {
			t.Errorf("summary %q (-want +got):\n%s", k, diff)
		}
	}
	if _, ok := s["weights_sha256"]; ok {
		t.Errorf("summary has weights_sha256: %v", s["weights_sha256"])
	}
	// --lr 2 diverges later (+Inf at step 142, epoch 4): the epochs before
	// it have their metrics lines, each JSON.
	code, _, errOut = runTrain(nil, "--epochs", "20", "--lr", "2", "--metrics", metrics)
	if code != exitDiverged || !strings.Contains(errOut, "training diverged at step 142 (epoch 4): the loss became +Inf") {
		t.Errorf("--lr 2: exit %d, stderr %q", code, errOut)
	}
	b, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	lines = strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("metrics line %q is not JSON", l)
		}
	}
	if len(lines) != 3 {
		t.Errorf("%d metrics lines, want 3 (the epochs before the divergence):\n%s", len(lines), b)
	}
}

// A model or a step too large for the node's memory is refused in one
// line, exit 2, before anything is allocated (the node stands at 256 MiB
// here, so that a model of 700 MiB stands for --hidden 16000,16000's
// 10.6 GiB, whose check trainer's TestCheckMemory has, without risking
// that much on a shared machine); a batch larger than the data is the
// whole data a step, not a panic in makeslice.
func TestTrainMemory(t *testing.T) {
	saved := memAvailable
	t.Cleanup(func() { memAvailable = saved })
	memAvailable = func() int64 { return 256 << 20 }
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"--hidden 4000,4000", []string{"--hidden", "4000,4000"}, 2,
			"batchkit: not enough memory for MLP 64-4000-4000-10 (16304010 parameters, 32 rows a step): the model, a step and the data take 726.35 MiB per rank, and this node has 256 MiB available\n"},
		{"--batch-size 9000000000000000000", []string{"--batch-size", "9000000000000000000"}, 0, ""},
		{"--batch-size 100000000", []string{"--batch-size", "100000000"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runTrain(nil, tc.args...)
			if code != tc.code || errOut != tc.stderr {
				t.Errorf("exit %d, stderr %q; want %d, %q", code, errOut, tc.code, tc.stderr)
			}
			if trained := strings.Contains(out, "test accuracy"); trained != (tc.code == 0) {
				t.Errorf("stdout %q", out)
			}
		})
	}
}
