package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// trainSummary is the part of batchkit train --format json's summary the
// tests read.
type trainSummary struct {
	TestAccuracy    float64 `json:"test_accuracy"`
	Steps           int     `json:"steps"`
	WorldSize       int     `json:"world_size"`
	Backend         string  `json:"backend"`
	ResumedFromStep int     `json:"resumed_from_step"`
	WeightsSHA256   string  `json:"weights_sha256"`
}

// summaryOf finds rank 0's summary in batchkit run's output ("[0] {...}").
func summaryOf(t *testing.T, out string) trainSummary {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if js, ok := strings.CutPrefix(l, "[0] {"); ok {
			var s trainSummary
			if err := json.Unmarshal([]byte("{"+js), &s); err != nil {
				t.Fatalf("%v: %s", err, l)
			}
			return s
		}
	}
	t.Fatalf("no summary from rank 0 in:\n%s", out)
	return trainSummary{}
}

// trainArgs is `batchkit run -n 2 -- batchkit train --format json` and flags.
func trainArgs(flags ...string) []string {
	return append([]string{"run", "-n", "2", "--", bin, "train", "--format", "json"}, flags...)
}

// Two ranks over TCP, twice: the same weights, and at least 95 % accuracy.
func TestTrainTwoRanks(t *testing.T) {
	cpu.enter(t)
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	var sums []string
	for range 2 {
		s := summaryOf(t, run(t, time.Minute, bin, trainArgs("--epochs", "10")...))
		if s.WorldSize != 2 || s.Backend != "tcp" || s.Steps != 230 || s.ResumedFromStep != 0 {
			t.Errorf("summary %+v: want 2 ranks over tcp, 230 steps, fresh", s)
		}
		if s.TestAccuracy < 0.95 {
			t.Errorf("test accuracy %.4f, want >= 0.95", s.TestAccuracy)
		}
		sums = append(sums, s.WeightsSHA256)
	}
	if sums[0] != sums[1] {
		t.Errorf("two identical runs ended with weights %s and %s", sums[0], sums[1])
	}
}

// slowTrain is a run long enough (~2 s) to be interrupted at a random step.
var slowTrain = []string{"--hidden", "512,512", "--batch-size", "8", "--epochs", "6", "--checkpoint-every", "5"}

// startTrain starts the slow run in its own process group, checkpointing in
// dir, with more flags.
func startTrain(t *testing.T, dir string, flags ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	return startGroup(t, append([]string{bin}, trainArgs(append(append(slowTrain, "--checkpoint-dir", dir), flags...)...)...)...)
}

// startGroup starts argv in a process group of its own, its stdout and
// stderr together, and kills the whole group when the test ends.
func startGroup(t *testing.T, argv ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	return cmd, &out
}

// waitCheckpoint waits until dir holds a checkpoint of step >= step.
func waitCheckpoint(t *testing.T, dir string, step int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		names, _ := filepath.Glob(filepath.Join(dir, "ckpt-*.bkpt"))
		for _, n := range names {
			var s int
			if _, err := fmt.Sscanf(filepath.Base(n), "ckpt-%d.bkpt", &s); err == nil && s >= step {
				return
			}
		}
	}
	t.Fatalf("no checkpoint of step %d or later in %s after 30 s", step, dir)
}

// The whole job (batchkit run and both ranks) SIGKILLed at a random step
// after a checkpoint, then the same command again: it resumes and ends
// with the weights of an uninterrupted run.
func TestTrainKillResume(t *testing.T) {
	cpu.enter(t)
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	want := summaryOf(t, run(t, time.Minute, bin, trainArgs(append(slowTrain, "--checkpoint-dir", t.TempDir())...)...))
	dir := t.TempDir()
	metrics := filepath.Join(t.TempDir(), "metrics.jsonl")
	cmd, _ := startTrain(t, dir, "--metrics", metrics)
	k := 5 * (1 + rand.IntN(80)) // steps 5 .. 400 of 540
	waitCheckpoint(t, dir, k)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	got := summaryOf(t, run(t, time.Minute, bin, trainArgs(append(slowTrain, "--checkpoint-dir", dir, "--metrics", metrics)...)...))
	// The metrics file holds every epoch once: what the killed run wrote
	// past its checkpoint is not there twice.
	b, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	var epochs []int
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct{ Epoch int }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("metrics line %q: %v", l, err)
		}
		epochs = append(epochs, e.Epoch)
	}
	if !slices.Equal(epochs, []int{1, 2, 3, 4, 5, 6}) {
		t.Errorf("metrics epochs %v, want 1..6 once each", epochs)
	}
	t.Logf("killed after checkpoint %d; resumed from step %d", k, got.ResumedFromStep)
	if got.ResumedFromStep < k || got.ResumedFromStep >= want.Steps {
		t.Errorf("resumed from step %d, want a step from %d on", got.ResumedFromStep, k)
	}
	if got.WeightsSHA256 != want.WeightsSHA256 || got.Steps != want.Steps {
		t.Errorf("resumed run: %d steps, weights %s; uninterrupted: %d steps, %s", got.Steps, got.WeightsSHA256, want.Steps, want.WeightsSHA256)
	}
}

// SIGTERM to batchkit run (forwarded to the ranks): a cancel, not a
// preemption. Every rank stops after the same step and rank 0 checkpoints
// all the same, but the job exits 143, never 75, which would ask for a
// requeue; run again, it ends with the uninterrupted run's weights.
func TestTrainSIGTERMCheckpoints(t *testing.T) {
	cpu.enter(t)
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	want := summaryOf(t, run(t, time.Minute, bin, trainArgs(append(slowTrain, "--checkpoint-dir", t.TempDir())...)...))
	dir := t.TempDir()
	cmd, out := startTrain(t, dir)
	waitCheckpoint(t, dir, 5)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Fatalf("after SIGTERM: %v, want exit status 143\n%s", err, out)
	}
	if !strings.Contains(out.String(), "[0] batchkit: cancelled after step") || !strings.Contains(out.String(), "exit 143, not a requeue") {
		t.Errorf("no cancel message from rank 0:\n%s", out)
	}
	got := summaryOf(t, run(t, time.Minute, bin, trainArgs(append(slowTrain, "--checkpoint-dir", dir)...)...))
	if got.ResumedFromStep == 0 || got.WeightsSHA256 != want.WeightsSHA256 {
		t.Errorf("resumed from step %d, weights %s; uninterrupted %s", got.ResumedFromStep, got.WeightsSHA256, want.WeightsSHA256)
	}
}

// restartTrain is slowTrain made long enough (~4 s) that a rank can be
// killed well before the end.
var restartTrain = []string{"--hidden", "512,512", "--batch-size", "8", "--epochs", "10", "--checkpoint-every", "5"}

// startRunTrain starts `batchkit run -n 2 RUNFLAGS -- batchkit train
// --format json restartTrain --checkpoint-dir dir` in its own process group,
// with stdout and stderr kept apart.
func startRunTrain(t *testing.T, dir string, runFlags ...string) (cmd *exec.Cmd, stdout, stderr *bytes.Buffer) {
	t.Helper()
	args := append([]string{"run", "-n", "2"}, runFlags...)
	args = append(args, "--", bin, "train", "--format", "json", "--checkpoint-dir", dir)
	cmd = exec.Command(bin, append(args, restartTrain...)...)
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	return cmd, stdout, stderr
}

// rankPid finds the child of batchkit run (pid parent) that is rank of the
// first attempt, by the children's environment.
func rankPid(t *testing.T, parent, rank int) int {
	t.Helper()
	want := []string{fmt.Sprintf("RANK=%d", rank), "TORCHELASTIC_RESTART_COUNT=0"}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", parent))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, pid := range strings.Fields(string(b)) {
			env, _ := os.ReadFile("/proc/" + pid + "/environ")
			vars := strings.Split(string(env), "\x00")
			if slices.Contains(vars, want[0]) && slices.Contains(vars, want[1]) {
				n, _ := strconv.Atoi(pid)
				return n
			}
		}
	}
	t.Fatalf("no child of %d with %v", parent, want)
	return 0
}

// waitExit waits up to timeout for cmd and returns its exit code and how
// long it took.
func waitExit(t *testing.T, cmd *exec.Cmd, timeout time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(timeout):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGQUIT) // goroutine dumps show where it hangs
		<-done
		t.Fatalf("batchkit run still running %v later", timeout)
	}
	return cmd.ProcessState.ExitCode(), time.Since(start)
}

// Rank 1 SIGKILLed after a checkpoint under --max-restarts: batchkit run
// starts both ranks again, they resume from the checkpoint, and the run
// ends with the uninterrupted run's weights.
func TestTrainRestartAfterKill(t *testing.T) {
	cpu.enter(t)
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	want := summaryOf(t, run(t, time.Minute, bin, trainArgs(append(restartTrain, "--checkpoint-dir", t.TempDir())...)...))
	dir := t.TempDir()
	cmd, stdout, stderr := startRunTrain(t, dir, "--max-restarts", "2")
	waitCheckpoint(t, dir, 50)
	if err := syscall.Kill(rankPid(t, cmd.Process.Pid, 1), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	code, _ := waitExit(t, cmd, time.Minute)
	if code != 0 {
		t.Fatalf("exit code %d, want 0\nstderr:\n%s", code, stderr)
	}
	// The restart names the first rank the launcher saw fail: rank 1 as a
	// rule, but rank 0, which fails at once on losing rank 1, can be seen
	// first; then its error names rank 1.
	killed := regexp.MustCompile(`(?m)^batchkit: rank 1 died \(signal 9\); restart 1 of 2 in 1s$`)
	lost := regexp.MustCompile(`(?m)^batchkit: rank 0 failed \(exit code 1\); restart 1 of 2 in 1s$`)
	if e := stderr.String(); !killed.MatchString(e) && !(lost.MatchString(e) && strings.Contains(e, "lost the connection to rank 1 ")) {
		t.Errorf("no restart line naming rank 1 in stderr:\n%s", e)
	}
	got := summaryOf(t, stdout.String())
	if got.ResumedFromStep < 50 || got.WeightsSHA256 != want.WeightsSHA256 || got.Steps != want.Steps {
		t.Errorf("restarted run: resumed from step %d, %d steps, weights %s; uninterrupted: %d steps, %s",
			got.ResumedFromStep, got.Steps, got.WeightsSHA256, want.Steps, want.WeightsSHA256)
	}
}

// Rank 1 SIGKILLed mid-run without restarts: rank 0 fails its next
// collective at once, naming rank 1, and batchkit run exits non-zero within
// seconds. A long --grace keeps the launcher's SIGKILL from hiding a rank 0
// that hangs.
func TestTrainDeadPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	dir := t.TempDir()
	cmd, _, stderr := startRunTrain(t, dir, "--grace", "1m")
	waitCheckpoint(t, dir, 50)
	if err := syscall.Kill(rankPid(t, cmd.Process.Pid, 1), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	code, took := waitExit(t, cmd, 30*time.Second)
	t.Logf("batchkit run exited %d, %v after rank 1 was killed", code, took)
	if code != 137 {
		t.Errorf("exit code %d, want 137 (rank 1's SIGKILL)\nstderr:\n%s", code, stderr)
	}
	if took > 5*time.Second {
		t.Errorf("batchkit run took %v to exit after rank 1 died, want < 5s", took)
	}
	if msg := "[0] batchkit: step "; !strings.Contains(stderr.String(), msg) || !strings.Contains(stderr.String(), "lost the connection to rank 1 ") {
		t.Errorf("rank 0 did not report losing rank 1:\n%s", stderr)
	}
}
