package trainer

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/batchkit/batchkit/internal/fulldisk"
	"github.com/batchkit/batchkit/internal/outfile"
)

// A checkpoint directory whose file system has room for the lock file but
// not for a checkpoint (one of the default model takes ~38 KiB) is refused
// before the first step on every rank, not at the first checkpoint.
func TestTrainCheckpointDirWithoutRoom(t *testing.T) {
	train, test := digitsSplit(t)
	cfg := defaults()
	cfg.Epochs, cfg.CheckpointEvery = 1, 0
	cfg.CheckpointDir = filepath.Join(fulldisk.Tmpfs(t, 16<<10), "ckpt")
	steps := 0
	cfg.OnStep = func(StepInfo) error { steps++; return nil }
	_, errs := trainWorld(2, train, test, func(int) Config { return cfg })
	var (
		le *LockError
		se *outfile.SpaceError
	)
	if !errors.As(errs[0], &se) || !strings.HasPrefix(errs[0].Error(), "cannot use checkpoint directory "+cfg.CheckpointDir+": no space left") {
		t.Errorf("rank 0: %v, want a SpaceError naming the directory", errs[0])
	}
	if !errors.As(errs[1], &le) {
		t.Errorf("rank 1: %v, want a LockError", errs[1])
	}
	if steps != 0 {
		t.Errorf("trained %d steps, want none", steps)
	}
	if ents, _ := os.ReadDir(cfg.CheckpointDir); len(ents) != 0 {
		t.Errorf("left in the directory: %v", ents)
	}
}

// A checkpoint directory another run left its lock file in (writable) but
// where this user cannot create a file is refused before the first step:
// the lock alone did not find it. Root runs this test binary again as
// nobody, in a directory of root's with a lock file anyone may write.
func TestTrainUnwritableCheckpointDir(t *testing.T) {
	if dir := os.Getenv("TRAINER_TEST_UNWRITABLE"); dir != "" {
		train, test := digitsSplit(t)
		cfg := defaults()
		cfg.Epochs, cfg.CheckpointDir = 1, dir
		steps := 0
		cfg.OnStep = func(StepInfo) error { steps++; return nil }
		_, errs := trainWorld(1, train, test, func(int) Config { return cfg })
		fmt.Println(errs[0])
		var le *LockError
		if !errors.As(errs[0], &le) || !errors.Is(errs[0], os.ErrPermission) || steps != 0 {
			fmt.Printf("%d steps\n", steps)
			os.Exit(3)
		}
		return
	}
	if os.Getuid() != 0 {
		t.Skip("needs root, to be nobody in a directory of root's")
	}
	base, err := os.MkdirTemp("", "trainer-unwritable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	dir := filepath.Join(base, "ckpt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, LockFileName), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, LockFileName), 0o666)
	self := filepath.Join(base, "trainer.test") // the build directory is root's alone
	copyExecutable(t, self)
	cmd := exec.Command(self, "-test.run=^TestTrainUnwritableCheckpointDir$")
	cmd.Env = append(os.Environ(), "TRAINER_TEST_UNWRITABLE="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v, want a LockError before the first step\n%s", err, out)
	}
	if !strings.Contains(string(out), "cannot use checkpoint directory "+dir+": cannot create a file in it: permission denied") {
		t.Errorf("as nobody: %s", out)
	}
}

func copyExecutable(t *testing.T, to string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint that cannot be written mid-run (the disk filled) stops
// every rank after the next step: rank 0 with the write's error, the
// others naming rank 0, not with a lost connection.
func TestTrainCheckpointFailsMidRun(t *testing.T) {
	train, test := digitsSplit(t)
	cfg := defaults()
	cfg.Epochs, cfg.CheckpointEvery = 1, 5
	cfg.CheckpointDir = fulldisk.Tmpfs(t, 64<<10) // the lock and one checkpoint; the second's temporary file fills it
	last := make([]int, 2)
	_, errs := trainWorld(2, train, test, func(r int) Config {
		c := cfg
		c.OnStep = func(s StepInfo) error { last[r] = s.GlobalStep; return nil }
		return c
	})
	if !errors.Is(errs[0], syscall.ENOSPC) || !strings.Contains(errs[0].Error(), "checkpoint at step 10") {
		t.Errorf("rank 0: %v, want the checkpoint of step 10's ENOSPC", errs[0])
	}
	var pe *PeerFailedError
	if !errors.As(errs[1], &pe) || pe.Rank != 0 {
		t.Errorf("rank 1: %v, want a PeerFailedError naming rank 0", errs[1])
	}
	if last[0] != 10 || last[1] != 10 {
		t.Errorf("last steps reported %v, want 10 on both ranks (the step after stops before its update)", last)
	}
}

// The result is reported (OnEnd) before the final checkpoint, so a final
// checkpoint that cannot be written (the disk filled during the run) loses
// no result; then every rank fails: rank 0 with the write's error, the
// others naming rank 0.
func TestTrainReportsBeforeFinalCheckpoint(t *testing.T) {
	train, test := digitsSplit(t)
	cfg := defaults()
	cfg.Epochs, cfg.CheckpointEvery = 2, 0
	cfg.CheckpointDir = fulldisk.Tmpfs(t, 64<<10)
	var reported []Result
	_, errs := trainWorld(2, train, test, func(r int) Config {
		c := cfg
		if r == 0 {
			c.OnEpoch = func(e EpochInfo) error {
				if e.Epoch == 1 {
					fulldisk.Fill(t, cfg.CheckpointDir)
				}
				return nil
			}
			c.OnEnd = func(res Result) error { reported = append(reported, res); return nil }
		}
		return c
	})
	if len(reported) != 1 || reported[0].Steps != 46 || reported[0].TestAcc < 0.9 {
		t.Errorf("reported %d results (%v), want one of 46 steps (2 epochs of 23)", len(reported), reportedSteps(reported))
	}
	if !errors.Is(errs[0], syscall.ENOSPC) {
		t.Errorf("rank 0: %v, want ENOSPC", errs[0])
	}
	var pe *PeerFailedError
	if !errors.As(errs[1], &pe) {
		t.Errorf("rank 1: %v, want a PeerFailedError", errs[1])
	}
}

func reportedSteps(rs []Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%d steps, test accuracy %.3f", r.Steps, r.TestAcc))
	}
	return out
}
