package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

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
