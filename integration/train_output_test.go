package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchkit/batchkit/internal/fulldisk"
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

// A final checkpoint that cannot be written (the disk filled during the
// run: a 64 KiB tmpfs holds the lock and the checkpoint of step 100, not
// that of step 138) loses neither the summary, printed before it, nor the
// other rank's word: it names rank 0 instead of a lost connection.
func TestTrainFinalCheckpointFails(t *testing.T) {
	if testing.Short() {
		t.Skip("trains")
	}
	dir := fulldisk.Tmpfs(t, 64<<10)
	cmd := exec.Command(bin, "run", "-n", "2", "--", bin, "train", "--epochs", "6",
		"--checkpoint-every", "100", "--checkpoint-dir", dir, "--format", "json")
	cmd.Env = localEnv()
	var stdout, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &errOut
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("%v, want exit 1", err)
	}
	stderr := errOut.String()
	if !strings.HasPrefix(stdout.String(), `[0] {"test_accuracy":`) {
		t.Errorf("stdout %q, want the summary", stdout.String())
	}
	for _, want := range []string{
		"[0] batchkit: checkpoint at step 138: writing " + dir + "/ckpt-0000000138.bkpt: ",
		"[1] batchkit: step 138: rank 0 failed (its error says why)\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "lost the connection") {
		t.Errorf("a rank lost its connection:\n%s", stderr)
	}
}
