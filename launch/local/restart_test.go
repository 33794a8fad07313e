package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/topology"
)

func TestDecide(t *testing.T) {
	failed := func(rank, exit int, sig syscall.Signal) Outcome {
		code := exit
		if sig != 0 {
			code = 128 + int(sig)
		}
		return Outcome{Code: code, Rank: rank, Exit: exit, Signal: sig}
	}
	stopped := failed(0, 1, 0)
	stopped.Stopped = true
	launchErr := Outcome{Code: 127, Rank: -1, LaunchErr: true}
	tests := []struct {
		name          string
		o             Outcome
		restarts, max int
		want          Decision
	}{
		{"success", Outcome{Rank: -1}, 0, 3, Decision{}},
		{"killed, restarts off", failed(1, -1, syscall.SIGKILL), 0, 0, Decision{}},
		{"killed", failed(1, -1, syscall.SIGKILL), 0, 3,
			Decision{Restart: true, Wait: time.Second, Say: "rank 1 died (signal 9); restart 1 of 3 in 1s"}},
		{"exit 1, last restart", failed(2, 1, 0), 2, 3,
			Decision{Restart: true, Wait: 4 * time.Second, Say: "rank 2 failed (exit code 1); restart 3 of 3 in 4s"}},
		{"exhausted", failed(1, -1, syscall.SIGKILL), 3, 3,
			Decision{Say: "rank 1 died (signal 9); no restarts left (3 of 3 done)"}},
		{"preempted", failed(0, 75, 0), 0, 3,
			Decision{Say: "rank 0 failed (exit code 75): it stopped on purpose (75: preempted, rerun later); not restarting"}},
		{"usage error", failed(0, 2, 0), 0, 3,
			Decision{Say: "rank 0 failed (exit code 2): a usage error would fail again; not restarting"}},
		{"diverged", failed(1, 65, 0), 0, 3,
			Decision{Say: "rank 1 failed (exit code 65): the training diverged and would diverge again at the same step; not restarting"}},
		{"killed by signal 2 is no usage error", failed(0, -1, syscall.SIGINT), 0, 3,
			Decision{Restart: true, Wait: time.Second, Say: "rank 0 died (signal 2); restart 1 of 3 in 1s"}},
		{"exit 143 restarts", failed(0, 143, 0), 1, 3,
			Decision{Restart: true, Wait: 2 * time.Second, Say: "rank 0 failed (exit code 143); restart 2 of 3 in 2s"}},
		{"the user stopped it", stopped, 0, 3, Decision{}},
		{"launcher error", launchErr, 0, 3, Decision{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Decide(tt.o, tt.restarts, tt.max, time.Second)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

// Restarts back off: each waits twice the one before, up to 30 s.
func TestBackoff(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 8; n++ {
		got = append(got, Backoff(time.Second, n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		30 * time.Second, 30 * time.Second, 30 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Backoff (-want +got):\n%s", diff)
	}
	if d := Backoff(time.Second, 1<<20); d != MaxRestartBackoff {
		t.Errorf("Backoff(1s, 1<<20) = %v, want %v", d, MaxRestartBackoff)
	}
}

// A restarted rank's environment, the restart variables included, is still
// batchkit run's to detection: torchrun, with the run id as job id.
func TestRankEnvDetected(t *testing.T) {
	env := rankEnv([]string{"PATH=/bin", "SLURM_JOB_ID=7", "SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=1"}, Profile{},
		RankTopology(1, 2, 40000), envsetup.Attempt{Token: "t", RunID: "run-1", Restart: 2, MaxRestarts: 3})
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	got, err := detect.Detect(func(k string) string { return m[k] }, detect.Options{Hostname: "h"})
	if err != nil {
		t.Fatal(err)
	}
	// Inside an srun step the job id and host names are Slurm's.
	want := RankTopology(1, 2, 40000)
	want.JobID, want.Hosts = "7", []string{"h"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Detect (-want +got):\n%s", diff)
	}
	if got.Launcher != topology.Torchrun {
		t.Errorf("launcher %v, want torchrun", got.Launcher)
	}
}

// attemptsScript is shell code appending "RESTART_COUNT MAX_RESTARTS PORT
// TOKEN" of this attempt to $D/env$RANK.
const attemptsScript = `echo $TORCHELASTIC_RESTART_COUNT $TORCHELASTIC_MAX_RESTARTS $MASTER_PORT $BATCHKIT_JOB_TOKEN >> "$D/env$RANK"; `

// attempts reads what attemptsScript recorded for rank: one field list per
// attempt.
func attempts(t *testing.T, dir string, rank int) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "env"+string(rune('0'+rank))))
	if err != nil {
		t.Fatal(err)
	}
	var a [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		a = append(a, strings.Fields(l))
	}
	return a
}

func restartOpts(dir string, n, max int, script string) Options {
	o := sh(n, attemptsScript+script)
	o.Env = []string{"PATH=" + os.Getenv("PATH"), "D=" + dir}
	o.MaxRestarts = max
	o.RestartBackoff = 10 * time.Millisecond
	return o
}

// Rank 1 fails in the first attempt only: the run succeeds after one
// restart, which is a fresh world (new port and token) told its count.
func TestRunRestartOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Rank 1 waits for rank 0's record, so that both attempts show in both.
	o := restartOpts(dir, 2, 3, `if [ $RANK = 1 ] && [ ! -e "$D/failed" ]; then
		while [ ! -e "$D/env0" ]; do sleep 0.01; done; touch "$D/failed"; exit 1; fi
		[ $TORCHELASTIC_RESTART_COUNT = 0 ] && exec sleep 1000; echo ok`)
	res := runLocal(t, context.Background(), o)
	if res.code != 0 || res.err != nil {
		t.Fatalf("code %d, err %v; stderr %q", res.code, res.err, res.stderr)
	}
	want := "batchkit: rank 1 exited with code 1; stopping 1 other rank\nbatchkit: rank 1 failed (exit code 1); restart 1 of 3 in 10ms\n"
	if res.stderr != want {
		t.Errorf("stderr %q, want %q", res.stderr, want)
	}
	if res.elapsed > 3*time.Second {
		t.Errorf("run took %v: the first attempt's ranks were not stopped promptly", res.elapsed)
	}
	a0, a1 := attempts(t, dir, 0), attempts(t, dir, 1)
	if len(a0) != 2 || len(a1) != 2 {
		t.Fatalf("attempts seen by rank 0: %q, rank 1: %q; want 2 each", a0, a1)
	}
	for i := range 2 {
		if diff := cmp.Diff(a0[i], a1[i]); diff != "" {
			t.Errorf("attempt %d: ranks disagree (-rank 0 +rank 1):\n%s", i, diff)
		}
		if a0[i][0] != string(rune('0'+i)) || a0[i][1] != "3" {
			t.Errorf("attempt %d: TORCHELASTIC_RESTART_COUNT, _MAX_RESTARTS = %s, %s; want %d, 3", i, a0[i][0], a0[i][1], i)
		}
	}
	if a0[0][2] == a0[1][2] || a0[0][3] == a0[1][3] {
		t.Errorf("the restart kept MASTER_PORT or BATCHKIT_JOB_TOKEN: %q then %q", a0[0], a0[1])
	}
}

// A rank that always fails: 1 + max attempts, then the run exits with its
// code; a rank killed by a signal restarts too.
func TestRunRestartsExhausted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := restartOpts(dir, 2, 2, `if [ $RANK = 1 ]; then
		[ $TORCHELASTIC_RESTART_COUNT = 0 ] && kill -9 $$; exit 3; fi; exec sleep 1000`)
	res := runLocal(t, context.Background(), o)
	if res.code != 3 || res.err != nil {
		t.Fatalf("code %d, err %v; want 3; stderr %q", res.code, res.err, res.stderr)
	}
	var says []string
	for _, l := range strings.Split(res.stderr, "\n") {
		if strings.Contains(l, "restart") {
			says = append(says, l)
		}
	}
	want := []string{
		"batchkit: rank 1 died (signal 9); restart 1 of 2 in 10ms",
		"batchkit: rank 1 failed (exit code 3); restart 2 of 2 in 20ms",
		"batchkit: rank 1 failed (exit code 3); no restarts left (2 of 2 done)",
	}
	if diff := cmp.Diff(want, says); diff != "" {
		t.Errorf("restart lines (-want +got):\n%s\nstderr %q", diff, res.stderr)
	}
	if a := attempts(t, dir, 1); len(a) != 3 {
		t.Errorf("rank 1 ran %d times, want 3: %q", len(a), a)
	}
}

// Exit 75 (preempted after a checkpoint) and exit 2 (usage error) are not
// restarted; neither is a stop the user asked for.
func TestRunNoRestart(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		script string
		code   int
		rank   int // the failing rank
		say    string
	}{
		{"preempted", `[ $RANK = 0 ] && exit 75; exec sleep 1000`, 75, 0,
			"batchkit: rank 0 failed (exit code 75): it stopped on purpose (75: preempted, rerun later); not restarting\n"},
		{"usage error", `[ $RANK = 1 ] && exit 2; exec sleep 1000`, 2, 1,
			"batchkit: rank 1 failed (exit code 2): a usage error would fail again; not restarting\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			res := runLocal(t, context.Background(), restartOpts(dir, 2, 3, tt.script))
			if res.code != tt.code || res.err != nil {
				t.Fatalf("code %d, err %v; want %d", res.code, res.err, tt.code)
			}
			if !strings.HasSuffix(res.stderr, tt.say) {
				t.Errorf("stderr %q, want it to end %q", res.stderr, tt.say)
			}
			if a := attempts(t, dir, tt.rank); len(a) != 1 {
				t.Errorf("%d attempts, want 1", len(a))
			}
		})
	}
	t.Run("signal", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		sigs := make(chan os.Signal, 1)
		o := restartOpts(dir, 2, 3, `trap "exit 1" INT; sleep 1000 & `+writePids+`wait`)
		done := make(chan result, 1)
		go func() { done <- runSignals(t, context.Background(), o, sigs) }()
		waitFiles(t, rankFiles(dir, "pids", 2), 5*time.Second)
		sigs <- syscall.SIGINT
		res := <-done
		if res.code != 1 {
			t.Errorf("code %d, want 1", res.code)
		}
		if want := "batchkit: got SIGINT; forwarding it to 2 ranks\n"; res.stderr != want {
			t.Errorf("stderr %q, want %q", res.stderr, want)
		}
		if a := attempts(t, dir, 0); len(a) != 1 {
			t.Errorf("%d attempts, want 1", len(a))
		}
	})
	t.Run("context cancelled", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		res := runLocal(t, ctx, restartOpts(dir, 2, 3, `exec sleep 1000`))
		if res.code != 143 || res.err == nil {
			t.Errorf("code %d, err %v; want 143, context.Canceled", res.code, res.err)
		}
		if a := attempts(t, dir, 0); len(a) != 1 {
			t.Errorf("%d attempts, want 1", len(a))
		}
	})
}

// A rank that fails at once is restarted after a wait that doubles (it was
// restarted 2,282 times in 10 s; issue 30, item 15), and a signal during
// the wait ends the run there with the failed attempt's code.
func TestRunRestartWaits(t *testing.T) {
	t.Parallel()
	t.Run("backoff", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		o := restartOpts(dir, 1, 3, `exit 4`)
		o.RestartBackoff = 100 * time.Millisecond
		res := runLocal(t, context.Background(), o)
		if res.code != 4 || res.err != nil {
			t.Fatalf("code %d, err %v; want 4; stderr %q", res.code, res.err, res.stderr)
		}
		if a := attempts(t, dir, 0); len(a) != 4 {
			t.Errorf("%d attempts, want 4", len(a))
		}
		// 100 + 200 + 400 ms between the four attempts.
		if res.elapsed < 700*time.Millisecond {
			t.Errorf("4 attempts took %v: the restarts did not wait 100, 200 and 400 ms", res.elapsed)
		}
		for _, want := range []string{"restart 1 of 3 in 100ms", "restart 2 of 3 in 200ms", "restart 3 of 3 in 400ms"} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("stderr %q does not say %q", res.stderr, want)
			}
		}
	})
	t.Run("a signal during the wait", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		sigs := make(chan os.Signal, 1)
		o := restartOpts(dir, 1, 3, `exit 4`)
		o.RestartBackoff = time.Hour
		done := make(chan result, 1)
		go func() { done <- runSignals(t, context.Background(), o, sigs) }()
		waitFiles(t, []string{filepath.Join(dir, "env0")}, 5*time.Second)
		time.Sleep(100 * time.Millisecond) // into the wait
		sigs <- syscall.SIGTERM
		var res result
		select {
		case res = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the signal did not end the wait")
		}
		if res.code != 4 || res.err != nil {
			t.Errorf("code %d, err %v; want the failed attempt's 4", res.code, res.err)
		}
		if !strings.HasSuffix(res.stderr, "restart 1 of 3 in 30s\nbatchkit: got SIGTERM while waiting to restart; not restarting\n") {
			t.Errorf("stderr %q", res.stderr)
		}
		if a := attempts(t, dir, 0); len(a) != 1 {
			t.Errorf("%d attempts, want 1", len(a))
		}
	})
}
