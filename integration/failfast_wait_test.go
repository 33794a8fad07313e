package integration

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// Under MPICH's Hydra, a rank's batchkit exec whose program has exited
// waits up to 10 s to tell rank 0's watcher; when rank 0 is not run by
// batchkit exec nothing answers, and the wait once passed without a word
// (issue 30, item 17). It now says why it waits, and how to turn it off.
// It runs alone: rank 1 dials rank 0's watch port, which under plain Hydra
// (no job id) derives from torchrun's default MASTER_PORT, the same for any
// such world alongside, whose rank 0 would answer (share_test.go).
func TestExecSaysWhyItWaitsUnderHydra(t *testing.T) {
	if testing.Short() {
		t.Skip("runs MPICH's Hydra")
	}
	needTool(t, "mpirun.mpich")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mpirun.mpich", "-n", "2", "sh", "-c",
		`if [ "$PMI_RANK" = 0 ]; then exec true; fi; exec "$0" exec -- true`, bin)
	cmd.Env = tokenEnv("BATCHKIT_JOB_TOKEN=t0k") // Hydra gives no job id to derive one from
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err := cmd.Run()
	want := regexp.MustCompile(`(?m)^batchkit exec: rank 1: the program exited with status 0; waiting up to \d+s to tell rank 0's batchkit exec at \S+, which has not answered \(does rank 0 run under batchkit exec\? BATCHKIT_FAIL_FAST=0 turns the watch off\)$`)
	if err != nil || !want.MatchString(stderr.String()) {
		t.Errorf("%v; output %q, want a line matching %s", err, stderr.String(), want)
	}
}
