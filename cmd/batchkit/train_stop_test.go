package main

import (
	"bytes"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/batchkit/batchkit/trainer"
)

// stopOnSignals: SIGUSR1 asks for a preemption, SIGTERM for a cancel, which
// stays: a SIGUSR1 after it (the batch script's, under srun) changes
// nothing, and a copy of the SIGTERM within secondTermAfter does not end
// the process.
func TestStopOnSignals(t *testing.T) {
	var errw bytes.Buffer
	stop, undo := stopOnSignals(&errw)
	defer undo()
	send := func(sig syscall.Signal, want trainer.StopReason) {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); stop() != want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after %v: %v, want %v", sig, stop(), want)
			}
		}
	}
	if stop() != trainer.NoStop {
		t.Fatalf("before any signal: %v", stop())
	}
	send(syscall.SIGUSR1, trainer.Preempt)
	send(syscall.SIGUSR1, trainer.Preempt)
	send(syscall.SIGTERM, trainer.Cancel)
	send(syscall.SIGUSR1, trainer.Cancel)
	send(syscall.SIGTERM, trainer.Cancel) // a copy, well within 0.5 s
	time.Sleep(50 * time.Millisecond)
	if errw.Len() != 0 {
		t.Errorf("a copy of the first SIGTERM counted as the second: %q", errw.String())
	}
}

// The exit code and message of each way a stop ends: 75 only for a
// preemption that saved a checkpoint.
func TestPreemptedExit(t *testing.T) {
	for _, tc := range []struct {
		err  trainer.PreemptedError
		code int
		msg  string
	}{
		{trainer.PreemptedError{Step: 7, Checkpoint: "d/c7", Reason: trainer.Preempt}, 75,
			"preempted after step 7 (SIGUSR1): checkpoint d/c7"},
		{trainer.PreemptedError{Step: 7, Reason: trainer.Preempt}, 138,
			"preempted after step 7 (SIGUSR1): nothing saved (no --checkpoint-dir); exit 138, not 75: a requeue would start from step 0"},
		{trainer.PreemptedError{Step: 7, Checkpoint: "d/c7", Reason: trainer.Cancel}, 143,
			"cancelled after step 7 (SIGTERM: scancel or the time limit): checkpoint d/c7; exit 143, not a requeue"},
		{trainer.PreemptedError{Step: 7, Reason: trainer.Cancel}, 143,
			"cancelled after step 7 (SIGTERM: scancel or the time limit): nothing saved (no --checkpoint-dir); exit 143, not a requeue"},
	} {
		e := &preemptedExit{&tc.err}
		if e.ExitCode() != tc.code || e.Error() != tc.msg || exitCode(e) != tc.code {
			t.Errorf("%+v: exit %d (exitCode %d) %q, want %d %q", tc.err, e.ExitCode(), exitCode(e), e.Error(), tc.code, tc.msg)
		}
	}
}
