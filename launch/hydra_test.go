package launch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Intel MPI's mpirun, a shell script running mpiexec.hydra: a forwarded
// SIGUSR1 reaches Hydra (here a stand-in that exits 75 on it, as a
// checkpointing job does), and the script exits with Hydra's status instead
// of dying of the signal (138).
func TestSignalReachesHydraUnderMpirunScript(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("mpiexec.hydra", "#!/bin/sh\ntrap 'exit 75' USR1\necho up > \"$0.up\"\nwhile :; do sleep 0.05; done\n")
	write("mpirun", "#!/bin/sh\n\"${0%/*}/mpiexec.hydra\" \"$@\"\nrc=$?\nexit $rc\n")
	sigs := make(chan os.Signal, 1)
	go func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, "mpiexec.hydra.up")); err == nil {
				break
			}
		}
		sigs <- syscall.SIGUSR1
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code, err := RunChild(ctx, exec.Command(filepath.Join(dir, "mpirun")), sigs)
	if err != nil || code != 75 {
		t.Fatalf("RunChild = %d, %v; want 75 from mpiexec.hydra, not the script's death by SIGUSR1 (138)", code, err)
	}
}
