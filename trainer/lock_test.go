package trainer

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchkit/batchkit/trainer/dirlock"
)

func owner(host string, pid int, job string) dirlock.Owner {
	return dirlock.Owner{Host: host, PID: pid, JobID: job, Since: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
}

// TestLockHelperProcess is the child of TestLockStaleTakenOver: it locks
// the directory, leaves a temporary file as a write cut short would, says
// "locked" and waits to be killed.
func TestLockHelperProcess(t *testing.T) {
	dir := os.Getenv("BATCHKIT_TEST_LOCK_DIR")
	if dir == "" {
		t.Skip("the child of TestLockStaleTakenOver")
	}
	if _, err := lockCheckpointDir(dir, dirlock.Owner{Host: hostname(), PID: os.Getpid(), JobID: "4242", Since: time.Now()}, nil); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	writeFile(t, filepath.Join(dir, tempPrefix()+"0123456789abcdef"), []byte("half a checkpoint"))
	fmt.Println("locked")
	select {}
}

// A run SIGKILLed while it holds the lock leaves its lock file; the next
// lock takes it over, says whose it was, and removes the dead run's
// temporary files, but not a fresh one of another host.
func TestLockStaleTakenOver(t *testing.T) {
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$")
	child.Env = append(os.Environ(), "BATCHKIT_TEST_LOCK_DIR="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("child: %q", line)
	}
	pid := child.Process.Pid
	host := hostname()
	_, err = lockCheckpointDir(dir, owner(host, os.Getpid(), ""), nil)
	if want := fmt.Sprintf("in use by host %s pid %d (job 4242) since ", host, pid); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("lock while the child holds it: %v, want %q", err, want)
	}
	childTemp := filepath.Join(dir, fmt.Sprintf("%s%s.%d.0123456789abcdef", tempMark, tempHost(host), pid))
	otherTemp := filepath.Join(dir, tempMark+"otherhost.77.00000000000000ff")
	oldTemp := filepath.Join(dir, ".ckpt-123456.tmp") // an older batchkit's, 2 hours old
	writeFile(t, otherTemp, []byte("being written on otherhost"))
	writeFile(t, oldTemp, []byte("left by a crash"))
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(oldTemp, old, old)
	if _, err := os.Stat(childTemp); err != nil {
		t.Fatal(err)
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	var w collect
	l, err := lockCheckpointDir(dir, owner(host, os.Getpid(), ""), w.warn)
	if err != nil {
		t.Fatalf("lock after the holder was killed: %v", err)
	}
	defer l.Unlock()
	want := fmt.Sprintf("checkpoint directory %s: took over the lock of host %s pid %d (job 4242) since ", dir, host, pid)
	if len(w.msg) != 1 || !strings.HasPrefix(w.msg[0], want) || strings.Contains(w.msg[0], "another host") {
		t.Errorf("warnings %q, want one starting %q", w.msg, want)
	}
	for path, kept := range map[string]bool{childTemp: false, oldTemp: false, otherTemp: true} {
		if _, err := os.Stat(path); (err == nil) != kept {
			t.Errorf("%s: %v, want kept %v", filepath.Base(path), err, kept)
		}
	}
}

// readOnlyDir is a directory in which nothing can be created, even by
// root (an immutable directory, chattr +i); the test is skipped where
// there is no way to make one.
func readOnlyDir(t *testing.T) string {
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return dir
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("running as root, which ignores permission bits, and chattr +i failed (%v: %s): no read-only directory to test", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
	return dir
}

// A checkpoint directory nothing can be written to fails the run before
// its first step (not at its first checkpoint), naming the directory.
func TestTrainReadOnlyCheckpointDir(t *testing.T) {
	train, test := digitsSplit(t)
	cfg := defaults()
	cfg.Epochs = 1
	cfg.CheckpointDir = readOnlyDir(t)
	steps := 0
	cfg.OnStep = func(StepInfo) error { steps++; return nil }
	_, errs := trainWorld(2, train, test, func(int) Config { return cfg })
	var ue *dirlock.UnusableError
	if !errors.As(errs[0], &ue) || !strings.Contains(errs[0].Error(), cfg.CheckpointDir) {
		t.Errorf("rank 0: %v, want an UnusableError naming %s", errs[0], cfg.CheckpointDir)
	}
	if !errors.As(errs[1], &ue) {
		t.Errorf("rank 1: %v, want an UnusableError", errs[1])
	}
	if steps != 0 {
		t.Errorf("trained %d steps, want none", steps)
	}
}
