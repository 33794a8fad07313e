package trainer

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func owner(host string, pid int, job string) LockOwner {
	return LockOwner{Host: host, PID: pid, JobID: job, Since: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
}

func lockPath(dir string) string { return filepath.Join(dir, LockFileName) }

// A second lock of a locked directory is refused naming the holder's host,
// PID, job and start; once unlocked, the lock file is gone and the next
// lock is taken without a word.
func TestLockRefusesSecondHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt") // created by the lock
	var w collect
	l, err := LockCheckpointDir(dir, owner("h1", os.Getpid(), "567"), w.warn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockCheckpointDir(dir, owner("h2", 1, ""), w.warn)
	var le *LockedError
	want := "checkpoint directory " + dir + " is in use by host h1 pid " + strconv.Itoa(os.Getpid()) +
		" (job 567) since 2026-03-04T05:06:07Z: wait for it, or use another --checkpoint-dir"
	if !errors.As(err, &le) || err.Error() != want {
		t.Errorf("second lock: %v\nwant %s", err, want)
	}
	_, err = LockCheckpointDir(dir, owner("h1", 1, "567"), w.warn)
	if want := "(job 567) since 2026-03-04T05:06:07Z (this same job: "; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("lock by the same job: %v, want it to say %q", err, want)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Errorf("second Unlock: %v", err)
	}
	if _, err := os.Lstat(lockPath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file after Unlock: %v, want none", err)
	}
	l, err = LockCheckpointDir(dir, owner("h2", os.Getpid(), ""), w.warn)
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	if len(w.msg) != 0 {
		t.Errorf("warnings %q, want none", w.msg)
	}
}

// TestLockHelperProcess is the child of TestLockStaleTakenOver: it locks
// the directory, leaves a temporary file as a write cut short would, says
// "locked" and waits to be killed.
func TestLockHelperProcess(t *testing.T) {
	dir := os.Getenv("BATCHKIT_TEST_LOCK_DIR")
	if dir == "" {
		t.Skip("the child of TestLockStaleTakenOver")
	}
	if _, err := LockCheckpointDir(dir, LockOwner{Host: hostname(), PID: os.Getpid(), JobID: "4242", Since: time.Now()}, nil); err != nil {
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
	_, err = LockCheckpointDir(dir, owner(host, os.Getpid(), ""), nil)
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
	l, err := LockCheckpointDir(dir, owner(host, os.Getpid(), ""), w.warn)
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

// A lock file whose flock is free but that names a run of another host, or
// holds junk, or nothing, is taken over; the warning says which, and that
// a run elsewhere cannot be checked from here.
func TestLockFileLeftTakenOver(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
	}{
		{"another host", `{"host":"node7","pid":1234,"job_id":"567","since":"2026-03-04T05:06:07Z"}` + "\n",
			"took over the lock of host node7 pid 1234 (job 567) since 2026-03-04T05:06:07Z, which ended without releasing it (node7 is another host"},
		{"junk", "\x00\x01junk", "held no run's name (junk?) and no lock: taken over"},
		{"half a line", `{"host":"node7","pid":12`, "held no run's name"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, lockPath(dir), []byte(tc.content))
			var w collect
			l, err := LockCheckpointDir(dir, owner("h1", os.Getpid(), ""), w.warn)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Unlock()
			if tc.want == "" && len(w.msg) != 0 || tc.want != "" && (len(w.msg) != 1 || !strings.Contains(w.msg[0], tc.want)) {
				t.Errorf("warnings %q, want one saying %q", w.msg, tc.want)
			}
			b, _ := os.ReadFile(lockPath(dir))
			if o := parseOwner(b); o == nil || o.Host != "h1" || o.PID != os.Getpid() {
				t.Errorf("lock file %q, want this run's owner", b)
			}
		})
	}
}

// A lock file that is a FIFO, a directory or a symbolic link, and a
// checkpoint directory that is a file, are refused at once with the path.
func TestLockCarelessPaths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string) string // the checkpoint dir
		want  string
	}{
		{"lock file a FIFO", func(t *testing.T, dir string) string {
			if err := syscall.Mkfifo(lockPath(dir), 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "/" + LockFileName + " is a FIFO, not a regular file: remove it"},
		{"lock file a directory", func(t *testing.T, dir string) string {
			os.Mkdir(lockPath(dir), 0o755)
			return dir
		}, "/" + LockFileName + " is a directory: remove it"},
		{"lock file a symbolic link", func(t *testing.T, dir string) string {
			os.Symlink(filepath.Join(dir, "elsewhere"), lockPath(dir))
			return dir
		}, "/" + LockFileName + " is a symbolic link (not followed): remove it"},
		{"checkpoint dir a file", func(t *testing.T, dir string) string {
			f := filepath.Join(dir, "file")
			writeFile(t, f, nil)
			return f
		}, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.setup(t, t.TempDir())
			done := make(chan error, 1)
			go func() {
				l, err := LockCheckpointDir(dir, owner("h1", os.Getpid(), ""), nil)
				l.Unlock()
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("LockCheckpointDir still running after 10 s")
			}
			var ue *LockError
			if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "cannot use checkpoint directory "+dir+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a LockError saying %q", err, tc.want)
			}
		})
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
	var ue *LockError
	if !errors.As(errs[0], &ue) || !strings.Contains(errs[0].Error(), cfg.CheckpointDir) {
		t.Errorf("rank 0: %v, want a LockError naming %s", errs[0], cfg.CheckpointDir)
	}
	if !errors.As(errs[1], &ue) {
		t.Errorf("rank 1: %v, want a LockError", errs[1])
	}
	if steps != 0 {
		t.Errorf("trained %d steps, want none", steps)
	}
}

// Where flock(2) does not work (NFS without a lock manager, Lustre without
// flock), the lock file's content alone marks the directory: a run of this
// host that still runs keeps it, one that is gone does not; a run that
// finds another's owner in its lock file at a checkpoint stops.
func TestLockWithoutFlock(t *testing.T) {
	saved := flock
	flock = func(int, int) error { return syscall.ENOLCK }
	t.Cleanup(func() { flock = saved })
	dir := t.TempDir()
	host := hostname()
	var w collect
	l, err := LockCheckpointDir(dir, owner(host, os.Getpid(), "1"), w.warn)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.msg) != 1 || !strings.Contains(w.msg[0], "does not support locks") {
		t.Errorf("warnings %q, want one saying the file system does not lock", w.msg)
	}
	_, err = LockCheckpointDir(dir, owner(host, os.Getpid(), "2"), nil)
	var le *LockedError
	if !errors.As(err, &le) || !le.Unsure || !strings.Contains(err.Error(), "may be in use by host "+host) || !strings.Contains(err.Error(), "remove "+lockPath(dir)) {
		t.Errorf("second lock: %v, want it refused as maybe in use", err)
	}
	// Another host's run writes its owner over this one's.
	writeFile(t, lockPath(dir), []byte(`{"host":"node7","pid":1234,"job_id":"567","since":"2026-03-04T05:06:07Z"}`+"\n"))
	err = l.check()
	var lost *LockLostError
	if !errors.As(err, &lost) || !strings.Contains(err.Error(), "was taken by host node7 pid 1234 (job 567)") {
		t.Errorf("check after another run took the lock: %v, want a LockLostError naming it", err)
	}
	l.Unlock()
	if _, err := os.Stat(lockPath(dir)); err != nil {
		t.Errorf("Unlock removed the lock file of the run that took it: %v", err)
	}
	// A dead process of this host left it.
	dead := exec.Command("true")
	dead.Run()
	writeFile(t, lockPath(dir), fmt.Appendf(nil, `{"host":%q,"pid":%d,"since":"2026-03-04T05:06:07Z"}`+"\n", host, dead.Process.Pid))
	l, err = LockCheckpointDir(dir, owner(host, os.Getpid(), ""), nil)
	if err != nil {
		t.Errorf("lock left by a dead process of this host: %v", err)
	}
	l.Unlock()
}

// A lock file removed by hand while a run holds it: the run locks it again
// at its next checkpoint, or, if another run has locked it meanwhile,
// stops naming that run.
func TestLockRemovedWhileHeld(t *testing.T) {
	dir := t.TempDir()
	var w collect
	l, err := LockCheckpointDir(dir, owner("h1", os.Getpid(), ""), w.warn)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(lockPath(dir))
	if err := l.check(); err != nil {
		t.Fatal(err)
	}
	if len(w.msg) != 1 || !strings.Contains(w.msg[0], "was removed or replaced while this run held it: locked again") {
		t.Errorf("warnings %q", w.msg)
	}
	if _, err := LockCheckpointDir(dir, owner("h2", 2, ""), nil); err == nil || !strings.Contains(err.Error(), "in use by host h1") {
		t.Errorf("lock after the first run locked again: %v, want it refused", err)
	}
	os.Remove(lockPath(dir))
	other, err := LockCheckpointDir(dir, owner("h2", 2, "9"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Unlock()
	err = l.check()
	var lost *LockLostError
	if !errors.As(err, &lost) || !strings.Contains(err.Error(), "taken by host h2 pid 2 (job 9)") {
		t.Errorf("check after another run locked: %v, want a LockLostError naming it", err)
	}
	l.Unlock()
	if _, err := LockCheckpointDir(dir, owner("h3", 3, ""), nil); err == nil || !strings.Contains(err.Error(), "in use by host h2") {
		t.Errorf("lock after the first run's Unlock: %v, want the second run's lock kept", err)
	}
}

// A run refused while the holder has its flock but has not yet written its
// name over that of the dead run it took over from names the holder, not
// the dead run.
func TestLockNamesHolderNotDeadPredecessor(t *testing.T) {
	dir := t.TempDir()
	host := hostname()
	dead := exec.Command("true")
	dead.Run()
	writeFile(t, lockPath(dir), fmt.Appendf(nil, `{"host":%q,"pid":%d,"since":"2026-03-04T05:06:07Z"}`+"\n", host, dead.Process.Pid))
	f, err := os.OpenFile(lockPath(dir), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		f.Truncate(0)
		f.WriteAt(fmt.Appendf(nil, `{"host":%q,"pid":%d,"job_id":"77","since":"2026-03-04T05:06:07Z"}`+"\n", host, os.Getpid()), 0)
	}()
	_, err = LockCheckpointDir(dir, owner(host, os.Getpid(), ""), nil)
	if want := fmt.Sprintf("in use by host %s pid %d (job 77)", host, os.Getpid()); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want it to say %q", err, want)
	}
}
