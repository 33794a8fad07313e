package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchkit/batchkit/internal/freeport"
)

// startRank starts one rank of a two-rank train by hand (the torchrun
// contract in its environment), so a test can signal it before its peer
// exists.
func startRank(t *testing.T, rank, port int, dir string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, "train", "--checkpoint-dir", dir, "--epochs", "2")
	cmd.Env = append(os.Environ(), "RANK="+strconv.Itoa(rank), "LOCAL_RANK="+strconv.Itoa(rank),
		"WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
		"TORCHELASTIC_RUN_ID=signal-test", "BATCHKIT_JOB_TOKEN=signal-test-token-0123456789abcdef")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &out
}

// A SIGUSR1 that reaches a rank while the world is still forming (Slurm's
// warning can come at any time) is kept: every rank stops after the first
// step with a checkpoint and exit 75, instead of the rank dying of it and
// the job ending with nothing to requeue from.
func TestTrainSignalAtStartUp(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	port, err := freeport.BelowEphemeral("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r1, out1 := startRank(t, 1, port, dir)
	time.Sleep(300 * time.Millisecond) // in its rendezvous, waiting for rank 0
	r1.Process.Signal(syscall.SIGUSR1)
	time.Sleep(100 * time.Millisecond)
	r0, out0 := startRank(t, 0, port, dir)
	for rank, c := range []*exec.Cmd{r0, r1} {
		code, _ := waitExit(t, c, 30*time.Second)
		if code != 75 {
			t.Errorf("rank %d exited %d, want 75\n%s\n%s", rank, code, out0, out1)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ckpt-0000000001.bkpt")); err != nil {
		t.Errorf("no checkpoint of step 1: %v", err)
	}
}

// A second SIGTERM ends a rank at once, by SIGTERM, even one that waits for
// a peer that never comes; but not a copy of the first that comes within
// half a second (Slurm, the launcher and batchkit exec can each pass the
// same one on), which would cost the checkpoint.
func TestTrainSecondSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	port, err := freeport.BelowEphemeral("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	r1, out := startRank(t, 1, port, t.TempDir())
	time.Sleep(300 * time.Millisecond)
	first := time.Now()
	r1.Process.Signal(syscall.SIGTERM)
	time.Sleep(100 * time.Millisecond)
	r1.Process.Signal(syscall.SIGTERM) // a copy
	time.Sleep(200 * time.Millisecond)
	if stat, err := os.ReadFile("/proc/" + strconv.Itoa(r1.Process.Pid) + "/stat"); err != nil || strings.Contains(string(stat), ") Z ") {
		t.Fatalf("rank exited on the first SIGTERM or its copy 0.1 s later:\n%s", out)
	}
	time.Sleep(time.Until(first.Add(600 * time.Millisecond)))
	r1.Process.Signal(syscall.SIGTERM)
	_, took := waitExit(t, r1, 10*time.Second)
	ws, _ := r1.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM || took > 5*time.Second || !strings.Contains(out.String(), "second SIGTERM") {
		t.Errorf("after a second SIGTERM: %v after %v, want killed by SIGTERM at once\n%s", r1.ProcessState, took, out)
	}
}

// SIGUSR1 to the launcher (a batch script's --signal=B:USR1, say) reaches
// the ranks through batchkit run and batchkit mpirun: they checkpoint and
// the launcher exits 75.
func TestTrainUSR1ThroughLaunchers(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	for _, tc := range []struct {
		name, tool string
		argv       []string
		codes      []int // what the launcher may exit with
	}{
		{"batchkit run", "", []string{bin, "run", "-n", "2", "--"}, []int{75}},
		{"batchkit mpirun openmpi", "mpirun.openmpi", []string{bin, "mpirun", "--flavor", "openmpi", "-n", "2", "--allow-run-as-root", "--oversubscribe", "--"}, []int{75}},
		// MPICH's Hydra forwards the signal, but once it has, it sometimes
		// exits 0 whatever the ranks' 75 (docs/reference/train.md: use srun
		// with MPICH under Slurm); the ranks' checkpoint is what is checked
		// there.
		{"batchkit mpirun mpich", "mpirun.mpich", []string{bin, "mpirun", "--flavor", "mpich", "-n", "2", "--"}, []int{75, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tool != "" {
				needTool(t, tc.tool)
			}
			dir := t.TempDir()
			cmd, out := startGroup(t, append(append(slices.Clone(tc.argv), bin, "train", "--checkpoint-dir", dir), restartTrain...)...)
			waitCheckpoint(t, dir, 10)
			cmd.Process.Signal(syscall.SIGUSR1)
			code, took := waitExit(t, cmd, 30*time.Second)
			if !slices.Contains(tc.codes, code) || !strings.Contains(out.String(), "batchkit: preempted after step ") {
				t.Errorf("%s exited %d after %v, want %v and the ranks' checkpoint\n%s", tc.name, code, took, tc.codes, out.String())
			}
		})
	}
}
