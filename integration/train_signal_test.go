package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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
// a peer that never comes.
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
	r1.Process.Signal(syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	if stat, err := os.ReadFile("/proc/" + strconv.Itoa(r1.Process.Pid) + "/stat"); err != nil || strings.Contains(string(stat), ") Z ") {
		t.Fatalf("rank exited on the first SIGTERM:\n%s", out)
	}
	r1.Process.Signal(syscall.SIGTERM)
	_, took := waitExit(t, r1, 10*time.Second)
	ws, _ := r1.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM || took > 5*time.Second || !strings.Contains(out.String(), "second SIGTERM") {
		t.Errorf("after a second SIGTERM: %v after %v, want killed by SIGTERM at once\n%s", r1.ProcessState, took, out)
	}
}
