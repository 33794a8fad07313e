package integration

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// batchkit sbatch --wait on a job that fails names the job's state, where
// it ran and its output file, from scontrol (issue 30, item 17: it printed
// the job id alone): a job that exits 3, and one cancelled while waited for
// (sbatch --wait itself exits 0 for a job cancelled before it started:
// batchkit exits 1 then, never 0).
func TestSbatchWaitNamesFailedJob(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	out := filepath.Join(dir, "job.out")

	t.Run("exit 3", func(t *testing.T) {
		cmd := exec.Command(bin, "sbatch", "--wait", "-N", "1", "-t", "2", "-o", out, "--", "sh", "-c", "echo hi; exit 3")
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		id := strings.TrimSpace(stdout.String())
		want := regexp.MustCompile(`^batchkit: job ` + regexp.QuoteMeta(id) + ` FAILED \(NonZeroExitCode, exit code 3:0, on node[12]\): its output is in ` + regexp.QuoteMeta(out) + "\n$")
		if code := cmd.ProcessState.ExitCode(); code != 3 || !want.MatchString(stderr.String()) {
			t.Errorf("exit %d, stderr %q; want 3 and a line matching %s", code, stderr.String(), want)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "sbatch", "--wait", "-N", "1", "-t", "5", "-o", out, "--", "sleep", "300")
		cmd.Dir = dir
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		id, err := bufio.NewReader(stdout).ReadString('\n')
		id = strings.TrimSpace(id)
		if err != nil || id == "" {
			t.Fatalf("no job id: %v; stderr %s", err, stderr.String())
		}
		if b, err := exec.Command("scancel", id).CombinedOutput(); err != nil { // our own job
			t.Fatalf("scancel %s: %v %s", id, err, b)
		}
		cmd.Wait()
		want := regexp.MustCompile(`^batchkit: job ` + id + ` CANCELLED \(`)
		if code := cmd.ProcessState.ExitCode(); code == 0 || !want.MatchString(stderr.String()) {
			t.Errorf("exit %d, stderr %q; want non-zero and a line matching %s", code, stderr.String(), want)
		}
	})
}
