package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// batchkit sbatch with the default profile runs the ranks under
// mpirun.openmpi, which gives each rank's stdout a pseudo terminal of its
// own although the job's output is a file: train drew its progress bar
// into the log (18 MB a minute). The log holds plain lines: the epochs and
// the summary, no carriage return, no escape sequence.
func TestSbatchTrainLogHasNoBar(t *testing.T) {
	needCluster(t)
	needTool(t, "mpirun.openmpi")
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	out := filepath.Join(dir, "job.out")
	run(t, 3*time.Minute, bin, "sbatch", "--wait", "-N", "2", "--ntasks-per-node", "1", "-o", out,
		"--", bin, "train", "--epochs", "3")
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	if !strings.Contains(log, "epoch   3/3") || !strings.Contains(log, "test accuracy") {
		t.Fatalf("no epoch lines or summary in the log:\n%s", log)
	}
	if strings.ContainsAny(log, "\r\x1b") {
		t.Errorf("the log holds a progress bar (carriage returns or escapes), %d bytes:\n%q", len(log), log[:min(len(log), 600)])
	}
}
