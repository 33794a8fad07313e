package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A rank that dies mid-run under any launcher: the launcher and the other
// rank end within seconds, and the output names rank 1, never a hang.
// (Under batchkit run: TestTrainDeadPeer.)
func TestTrainDeadPeerEveryLauncher(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	for _, tc := range []struct {
		name, tool string
		cluster    bool
		argv       []string
	}{
		{"batchkit mpirun openmpi", "mpirun.openmpi", false, []string{bin, "mpirun", "--flavor", "openmpi", "-n", "2", "--allow-run-as-root", "--oversubscribe", "--"}},
		{"batchkit mpirun mpich", "mpirun.mpich", false, []string{bin, "mpirun", "--flavor", "mpich", "-n", "2", "--"}},
		{"srun", "srun", true, []string{"srun", "-N2", "-n2", "--kill-on-bad-exit=0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			needTool(t, tc.tool)
			if tc.cluster {
				needCluster(t)
			}
			dir := t.TempDir()
			os.Chmod(dir, 0o777)
			cmd, out := startGroup(t, append(append(slices.Clone(tc.argv), bin, "train", "--checkpoint-dir", dir), restartTrain...)...)
			waitCheckpoint(t, dir, 20)
			if err := syscall.Kill(rankOf(t, dir, 1), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			code, took := waitExit(t, cmd, 30*time.Second)
			t.Logf("%s exited %d, %v after rank 1 was killed", tc.name, code, took)
			if code == 0 || took > 10*time.Second {
				t.Errorf("exit %d after %v, want non-zero within 10 s\n%s", code, took, out.String())
			}
			// Rank 0's own error, or the launcher's line about rank 1 (Open
			// MPI) or task 1 (srun). MPICH's Hydra kills rank 0 within ~0.1 s,
			// before it can say anything, and its banner names a PID and a
			// host, not the rank: that is all there is to check there.
			if !regexp.MustCompile(`rank 1\b|task 1\b|BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES`).MatchString(out.String()) {
				t.Errorf("nothing names rank 1:\n%s", out.String())
			}
		})
	}
}

// rankOf is the pid of the train process of rank whose command line names
// the checkpoint directory dir, whatever launched it.
func rankOf(t *testing.T, dir string, rank int) int {
	t.Helper()
	r := strconv.Itoa(rank)
	keys := []string{"RANK=" + r, "SLURM_PROCID=" + r, "OMPI_COMM_WORLD_RANK=" + r, "PMI_RANK=" + r}
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		cl, _ := os.ReadFile(f)
		args := strings.Split(string(cl), "\x00")
		if len(args) < 2 || args[1] != "train" || !slices.Contains(args, dir) {
			continue
		}
		env, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "environ"))
		vars := strings.Split(string(env), "\x00")
		if slices.ContainsFunc(keys, func(k string) bool { return slices.Contains(vars, k) }) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			return pid
		}
	}
	t.Fatalf("no train process of rank %d with %s", rank, dir)
	return 0
}
