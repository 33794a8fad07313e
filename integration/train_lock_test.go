package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Two jobs started at once on one checkpoint directory (a script submitted
// twice): the one that locks it first trains to the end as if alone; the
// other is refused before its first step, every rank of it at once, with
// one line naming the host and PID that hold the directory, exit 2.
func TestTrainCheckpointDirInUse(t *testing.T) {
	cpu.enter(t)
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	host, _ := os.Hostname()
	for _, n := range []string{"1", "2"} {
		t.Run(n+" rank(s)", func(t *testing.T) {
			alone := append([]string{"run", "-n", n, "--", bin, "train", "--format", "json", "--checkpoint-dir", t.TempDir()}, slowTrain...)
			want := summaryOf(t, run(t, time.Minute, bin, alone...))
			dir := t.TempDir()
			argv := append([]string{bin, "run", "-n", n, "--", bin, "train", "--format", "json", "--checkpoint-dir", dir}, slowTrain...)
			type job struct {
				cmd  *exec.Cmd
				out  *bytes.Buffer
				code int
				took time.Duration
			}
			jobs := []*job{{}, {}}
			for _, j := range jobs {
				j.cmd, j.out = startGroup(t, argv...)
			}
			done := make(chan struct{})
			start := time.Now()
			for _, j := range jobs {
				go func() {
					j.cmd.Wait()
					j.code, j.took = j.cmd.ProcessState.ExitCode(), time.Since(start)
					done <- struct{}{}
				}()
			}
			for range jobs {
				select {
				case <-done:
				case <-time.After(2 * time.Minute):
					for _, j := range jobs {
						syscall.Kill(-j.cmd.Process.Pid, syscall.SIGQUIT)
					}
					t.Fatalf("jobs still running after 2 minutes")
				}
			}
			inUse := regexp.MustCompile(`(?m)^\[0\] batchkit: checkpoint directory ` + regexp.QuoteMeta(dir) + ` is in use by host ` +
				regexp.QuoteMeta(host) + ` pid [0-9]+ \(job [^)]+\) since [0-9T:+Z-]+: wait for it, or use another --checkpoint-dir$`)
			var refused, ran *job
			for _, j := range jobs {
				if inUse.MatchString(j.out.String()) {
					refused = j
				} else {
					ran = j
				}
			}
			if refused == nil || ran == nil {
				t.Fatalf("want one job refused and one run:\nfirst (exit %d):\n%s\nsecond (exit %d):\n%s", jobs[0].code, jobs[0].out, jobs[1].code, jobs[1].out)
			}
			if refused.code != 2 || refused.took > 15*time.Second {
				t.Errorf("refused job: exit %d after %v, want 2 at once\n%s", refused.code, refused.took, refused.out)
			}
			if strings.Contains(refused.out.String(), "epoch ") {
				t.Errorf("the refused job trained:\n%s", refused.out)
			}
			if n == "2" && !strings.Contains(refused.out.String(), "[1] batchkit: checkpoint directory "+dir+" is in use by another run (rank 0 says which)") &&
				!strings.Contains(refused.out.String(), "stopping 1 other rank") {
				t.Errorf("the refused job's rank 1 neither said why nor was stopped:\n%s", refused.out)
			}
			if ran.code != 0 {
				t.Fatalf("the job that holds the directory: exit %d\n%s", ran.code, ran.out)
			}
			if s := summaryOf(t, ran.out.String()); s.ResumedFromStep != 0 || s.WeightsSHA256 != want.WeightsSHA256 {
				t.Errorf("the job that holds the directory: resumed from step %d, weights %s; want a fresh run's, %s", s.ResumedFromStep, s.WeightsSHA256, want.WeightsSHA256)
			}
			if _, err := os.Lstat(filepath.Join(dir, ".batchkit.lock")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("lock file after both jobs: %v, want none", err)
			}
		})
	}
}

// The lock is gone after a run stopped by SIGTERM (a cancel: exit 143); a job
// SIGKILLed leaves its lock file, which the next run takes over, saying
// whose it was, and then removes.
func TestTrainLockAfterSignals(t *testing.T) {
	cpu.enter(t)
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	dir := t.TempDir()
	lock := filepath.Join(dir, ".batchkit.lock")
	cmd, out := startTrain(t, dir)
	waitCheckpoint(t, dir, 5)
	cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := waitExit(t, cmd, time.Minute); code != 143 {
		t.Fatalf("after SIGTERM: exit %d, want 143\n%s", code, out)
	}
	if _, err := os.Lstat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file after SIGTERM: %v, want none", err)
	}

	cmd, out = startTrain(t, dir)
	waitCheckpoint(t, dir, 200)
	b, err := os.ReadFile(lock)
	if err != nil {
		t.Fatalf("no lock file while the job runs: %v\n%s", err, out)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	if b2, err := os.ReadFile(lock); err != nil || !bytes.Equal(b, b2) {
		t.Fatalf("lock file after SIGKILL: %q, %v; want the killed run's %q", b2, err, b)
	}
	pid := regexp.MustCompile(`"pid":([0-9]+)`).FindSubmatch(b)
	if pid == nil {
		t.Fatalf("lock file %q names no pid", b)
	}
	args := trainArgs(append(slowTrain, "--checkpoint-dir", dir)...)
	c := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		t.Fatalf("run after SIGKILL: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	host, _ := os.Hostname()
	want := fmt.Sprintf("[0] batchkit: warning: checkpoint directory %s: took over the lock of host %s pid %s (job ", dir, host, pid[1])
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
	}
	if s := summaryOf(t, stdout.String()); s.ResumedFromStep < 200 {
		t.Errorf("resumed from step %d, want 200 or later", s.ResumedFromStep)
	}
	if _, err := os.Lstat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file after the run: %v, want none", err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, ".ckpt*")); len(tmps) != 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
}
