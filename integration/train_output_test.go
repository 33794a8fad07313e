package integration

import (
	"bytes"
	"fmt"
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
	mostlyWaits(t)
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
	cpu.enter(t)
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

// Ranks given different flags or data are refused before the first step,
// exit 2, each naming what differs: a different --hidden was "the weights of
// rank(s) [1] differ" (exit 1), different data of one shape trained without
// a word (exit 0). batchkit run -n 2 runs each rank's own command line.
func TestTrainRanksDisagree(t *testing.T) {
	mostlyWaits(t)
	if testing.Short() {
		t.Skip("trains")
	}
	dir := t.TempDir()
	for r, label := range []string{"0", "1"} { // rank 1's file differs in one label
		var b strings.Builder
		for i := range 40 {
			fmt.Fprintf(&b, "%d,%d,%d\n", i, i*i%7, i%2)
		}
		b.WriteString("1,1," + label + "\n")
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("d%d.csv", r)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, flags string
		want        []string
	}{
		// Rank 1's line; rank 0's says the same, unless batchkit run
		// stopped it first.
		{"--hidden", "--hidden $((64 >> RANK))", []string{
			"[1] batchkit: the ranks were given different settings or data: rank 1: --hidden 32 (rank 0: 64)\n"}},
		{"--data of one shape", "--data " + dir + "/d$RANK.csv", []string{
			"[1] batchkit: the ranks were given different settings or data: rank 1: --data 33 train / 8 test rows × 2 features, 2 classes, sha256 "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, "run", "-n", "2", "--", "sh", "-c", `exec "$0" train --epochs 1 `+tc.flags, bin)
			cmd.Env = localEnv()
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			for _, want := range tc.want {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
			if strings.Contains(stderr.String(), "differ from rank 0's") {
				t.Errorf("the weights were compared: %s", stderr.String())
			}
			if strings.Contains(stdout.String(), "epoch ") {
				t.Errorf("trained:\n%s", stdout.String())
			}
		})
	}
}
