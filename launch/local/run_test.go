package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchkit/batchkit/launch"
)

// These tests start real processes (sh, sleep) and check what they see and
// that none outlives a run.

type result struct {
	code           int
	err            error
	stdout, stderr string
	elapsed        time.Duration
}

// runLocal runs o with a minimal environment and captured output.
func runLocal(t *testing.T, ctx context.Context, o Options) result {
	t.Helper()
	return runSignals(t, ctx, o, nil)
}

// runSignals is runLocal forwarding sigs: NewPlan, then Run, as the CLI
// does; NewPlan's error is returned with exit 2.
func runSignals(t *testing.T, ctx context.Context, o Options, sigs <-chan os.Signal) result {
	t.Helper()
	if o.Env == nil {
		o.Env = []string{"PATH=" + os.Getenv("PATH")}
	}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	p, err := NewPlan(o)
	if err != nil {
		return result{2, err, "", "", time.Since(start)}
	}
	code, err := Run(ctx, p, launch.IO{Stdout: &stdout, Stderr: &stderr}, sigs)
	return result{code, err, stdout.String(), stderr.String(), time.Since(start)}
}

func sh(n int, script string) Options {
	return Options{N: n, Cmd: "sh", Args: []string{"-c", script}, Grace: DefaultGrace}
}

// gone reports whether pid has exited. A zombie has: it waits only to be
// reaped, and an orphan's reaper (PID 1 in a container) may never do it.
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	state, _, ok := parseStat(b)
	return ok && (state == 'Z' || state == 'X')
}

// waitFiles waits until every path exists and returns their contents.
func waitFiles(t *testing.T, paths []string, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var out []string
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				break
			}
			out = append(out, string(b))
		}
		if len(out) == len(paths) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %v", paths)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pidsIn reads the pids that the ranks wrote ("$$ $!") into files.
func pidsIn(t *testing.T, contents []string) []int {
	t.Helper()
	var pids []int
	for _, c := range contents {
		for _, f := range strings.Fields(c) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("bad pid file %q", c)
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

func assertGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("process %d survived the run", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func rankFiles(dir, name string, n int) []string {
	var p []string
	for i := range n {
		p = append(p, filepath.Join(dir, name+strconv.Itoa(i)))
	}
	return p
}

// writePids is shell code that records "$$ $!" (the rank and the
// background job it started) in $D/pids$RANK, atomically.
const writePids = `echo $$ $! > "$D/tmp$RANK" && mv "$D/tmp$RANK" "$D/pids$RANK"; `

func TestRunEnvironment(t *testing.T) {
	t.Parallel()
	script := `echo $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $NODE_RANK $GROUP_RANK $GROUP_WORLD_SIZE $MASTER_ADDR $MASTER_PORT $BATCHKIT_JOB_TOKEN $KEEP`
	line := regexp.MustCompile(`^\[(\d)\] (\d) (\d) 3 3 0 0 1 127\.0\.0\.1 (\d+) ([0-9a-f]{64}) keep$`)

	o := sh(3, script)
	o.Env = []string{"PATH=" + os.Getenv("PATH"), "KEEP=keep", "RANK=99", "MASTER_PORT=7"}
	res := runLocal(t, context.Background(), o)
	if res.code != 0 || res.err != nil || res.stderr != "" {
		t.Fatalf("code %d, err %v, stderr %q", res.code, res.err, res.stderr)
	}
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	slices.Sort(lines)
	if len(lines) != 3 {
		t.Fatalf("want 3 lines, got %q", res.stdout)
	}
	var port, token string
	for i, l := range lines {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q does not match %v", l, line)
		}
		if r := strconv.Itoa(i); m[1] != r || m[2] != r || m[3] != r {
			t.Errorf("line %q: want rank and local rank %d", l, i)
		}
		if i == 0 {
			port, token = m[4], m[5]
		} else if m[4] != port || m[5] != token {
			t.Errorf("ranks disagree on MASTER_PORT or BATCHKIT_JOB_TOKEN: %q", lines)
		}
	}
	if port == "7" || port == "0" {
		t.Errorf("MASTER_PORT %s: want a free port chosen by the launcher", port)
	}

	// An explicit port, and an inherited token, are kept.
	o = sh(2, `echo $MASTER_PORT $BATCHKIT_JOB_TOKEN`)
	o.MasterPort = 12345
	o.Env = []string{"PATH=" + os.Getenv("PATH"), "BATCHKIT_JOB_TOKEN=inherited"}
	res = runLocal(t, context.Background(), o)
	lines = strings.Split(strings.TrimSpace(res.stdout), "\n")
	slices.Sort(lines)
	if want := []string{"[0] 12345 inherited", "[1] 12345 inherited"}; !slices.Equal(lines, want) {
		t.Errorf("got %q, want %q", lines, want)
	}
}

// Heavy concurrent output from real ranks: every line intact, prefixed with
// its own rank, on the right stream, in order; a final partial line too.
func TestRunOutput(t *testing.T) {
	t.Parallel()
	const n, lines = 4, 2000
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "out $RANK $i ................................"; echo "err $RANK $i" >&2; i=$((i+1)); done; printf "tail $RANK"`, lines)
	res := runLocal(t, context.Background(), sh(n, script))
	if res.code != 0 || res.err != nil {
		t.Fatalf("code %d, err %v", res.code, res.err)
	}
	check := func(stream, text, kind string) {
		re := regexp.MustCompile(`^\[(\d)\] (?:` + kind + ` (\d) (\d+)(?: \.+)?|tail (\d))$`)
		next := make([]int, n)
		tails := 0
		for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			m := re.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("%s: mangled line %q", stream, l)
			}
			rank, _ := strconv.Atoi(m[1])
			if m[4] != "" {
				if m[4] != m[1] || next[rank] != lines {
					t.Fatalf("%s: misplaced %q", stream, l)
				}
				tails++
				continue
			}
			if m[2] != m[1] {
				t.Fatalf("%s: line of rank %s prefixed [%s]: %q", stream, m[2], m[1], l)
			}
			if i, _ := strconv.Atoi(m[3]); i != next[rank] {
				t.Fatalf("%s: rank %d: line %d after %d", stream, rank, i, next[rank]-1)
			}
			next[rank]++
		}
		for r, c := range next {
			if c != lines {
				t.Errorf("%s: rank %d printed %d lines, want %d", stream, r, c, lines)
			}
		}
		if kind == "out" && tails != n {
			t.Errorf("%s: %d final partial lines, want %d", stream, tails, n)
		}
	}
	check("stdout", res.stdout, "out")
	check("stderr", res.stderr, "err")
}

// One rank exits 3: the run exits 3, says so once, and the others are
// stopped by SIGTERM, well within the grace period.
func TestRunExitCode(t *testing.T) {
	t.Parallel()
	// The failing rank's last words come before the launcher's line about
	// it (they used to race, the launcher's first in most runs).
	for range 5 {
		res := runLocal(t, context.Background(), sh(4, `if [ $RANK = 1 ]; then sleep 0.2; echo "out of memory" >&2; exit 3; fi; exec sleep 1000`))
		if res.code != 3 || res.err != nil {
			t.Fatalf("code %d, err %v; want 3", res.code, res.err)
		}
		if want := "[1] out of memory\nbatchkit: rank 1 exited with code 3; stopping 3 other ranks\n"; res.stderr != want {
			t.Errorf("stderr %q, want %q", res.stderr, want)
		}
		if res.elapsed > 3*time.Second {
			t.Errorf("run took %v: the other ranks were not stopped promptly", res.elapsed)
		}
	}
}

// A rank killed with SIGKILL ends the run; every rank and every process a
// rank started (here a background sleep) is gone afterwards.
func TestRunKilledRank(t *testing.T) {
	t.Parallel()
	const n = 3
	dir := t.TempDir()
	o := sh(n, `sleep 1000 & `+writePids+`wait`)
	o.Env = []string{"PATH=" + os.Getenv("PATH"), "D=" + dir}
	done := make(chan result, 1)
	go func() { done <- runLocal(t, context.Background(), o) }()

	pids := pidsIn(t, waitFiles(t, rankFiles(dir, "pids", n), 5*time.Second))
	if err := syscall.Kill(pids[2], syscall.SIGKILL); err != nil { // rank 1 itself
		t.Fatal(err)
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(4 * time.Second):
		t.Fatal("run did not end within 4s of a rank being killed")
	}
	if res.code != 128+9 {
		t.Errorf("code %d, want 137", res.code)
	}
	if want := "batchkit: rank 1 was killed by SIGKILL (code 137); stopping 2 other ranks\n"; res.stderr != want {
		t.Errorf("stderr %q, want %q", res.stderr, want)
	}
	assertGone(t, pids)
}

// Ranks that ignore SIGTERM are killed after the grace period.
func TestRunGrace(t *testing.T) {
	t.Parallel()
	const n = 3
	dir := t.TempDir()
	// Rank 0 fails once every rank has recorded its pids.
	o := sh(n, `trap "" TERM; sleep 1000 & `+writePids+
		`if [ $RANK = 0 ]; then while [ ! -e "$D/pids1" ] || [ ! -e "$D/pids2" ]; do sleep 0.01; done; exit 4; fi; wait`)
	o.Env = []string{"PATH=" + os.Getenv("PATH"), "D=" + dir}
	o.Grace = 300 * time.Millisecond
	res := runLocal(t, context.Background(), o)
	if res.code != 4 {
		t.Errorf("code %d, want 4", res.code)
	}
	if !strings.HasPrefix(res.stderr, "batchkit: rank 0 exited with code 4; stopping 2 other ranks\n") {
		t.Errorf("stderr %q", res.stderr)
	}
	if res.elapsed < o.Grace || res.elapsed > 4*time.Second {
		t.Errorf("run took %v, want a little over the %v grace period", res.elapsed, o.Grace)
	}
	assertGone(t, pidsIn(t, waitFiles(t, rankFiles(dir, "pids", n), time.Second)))
}

// What a successful rank leaves in its process group is stopped when the run
// ends, whether it holds the output pipe or not.
func TestRunLeftovers(t *testing.T) {
	t.Parallel()
	const n = 2
	dir := t.TempDir()
	o := sh(n, `if [ $RANK = 0 ]; then sleep 1000 & else sleep 1000 >/dev/null 2>&1 & fi; `+writePids+`echo done`)
	o.Env = []string{"PATH=" + os.Getenv("PATH"), "D=" + dir}
	res := runLocal(t, context.Background(), o)
	if res.code != 0 || res.err != nil {
		t.Errorf("code %d, err %v, stderr %q", res.code, res.err, res.stderr)
	}
	if res.elapsed > 3*time.Second {
		t.Errorf("run took %v", res.elapsed)
	}
	assertGone(t, pidsIn(t, waitFiles(t, rankFiles(dir, "pids", n), time.Second)))
}

// A signal for the launcher reaches every rank; the run exits 128+S when the
// ranks handled it and exited 0, and whatever they left is stopped.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	const n = 3
	dir := t.TempDir()
	sigs := make(chan os.Signal, 1)
	o := sh(n, `trap "echo got INT; exit 0" INT; sleep 1000 & `+writePids+`wait`)
	o.Env = []string{"PATH=" + os.Getenv("PATH"), "D=" + dir}
	done := make(chan result, 1)
	go func() { done <- runSignals(t, context.Background(), o, sigs) }()
	pids := pidsIn(t, waitFiles(t, rankFiles(dir, "pids", n), 5*time.Second))
	sigs <- syscall.SIGINT
	var res result
	select {
	case res = <-done:
	case <-time.After(4 * time.Second):
		t.Fatal("run did not end within 4s of SIGINT")
	}
	if res.code != 130 || res.err != nil {
		t.Errorf("code %d, err %v; want 130", res.code, res.err)
	}
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	slices.Sort(lines)
	if want := []string{"[0] got INT", "[1] got INT", "[2] got INT"}; !slices.Equal(lines, want) {
		t.Errorf("stdout %q, want %q", lines, want)
	}
	if want := "batchkit: got SIGINT; forwarding it to 3 ranks\n"; res.stderr != want {
		t.Errorf("stderr %q, want %q", res.stderr, want)
	}
	// The background sleeps ignore SIGINT (POSIX sh, no job control); the
	// cleanup's SIGTERM must have ended them.
	assertGone(t, pids)
}

func TestRunContextCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	res := runLocal(t, ctx, sh(2, `exec sleep 1000`))
	if !errors.Is(res.err, context.Canceled) || res.code != 143 {
		t.Errorf("code %d, err %v; want 143, context.Canceled", res.code, res.err)
	}
}

func TestRunTee(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "logs", "run1")
	o := sh(2, `echo out $RANK; echo err $RANK >&2; printf "tail $RANK"`)
	o.TeeDir = dir
	res := runLocal(t, context.Background(), o)
	if res.code != 0 || res.err != nil {
		t.Fatalf("code %d, err %v", res.code, res.err)
	}
	for r := range 2 {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%d.log", r)))
		if err != nil {
			t.Fatal(err)
		}
		// stdout and stderr are separate pipes: their relative order is
		// not defined, their lines are whole.
		got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		slices.Sort(got)
		want := []string{fmt.Sprintf("err %d", r), fmt.Sprintf("out %d", r), fmt.Sprintf("tail %d", r)}
		if !slices.Equal(got, want) {
			t.Errorf("rank-%d.log: %q, want %q", r, got, want)
		}
	}
	if !strings.Contains(res.stdout, "[1] out 1\n") {
		t.Errorf("--tee should not take the output away: %q", res.stdout)
	}

	// A second run into the same directory refuses before starting a rank.
	before, _ := os.ReadFile(filepath.Join(dir, "rank-1.log"))
	marker := filepath.Join(t.TempDir(), "started")
	o = sh(3, `touch `+marker)
	o.TeeDir = dir
	res = runLocal(t, context.Background(), o)
	if res.code != 2 || !errors.Is(res.err, launch.ErrInvalid) {
		t.Fatalf("code %d, err %v; want 2, ErrInvalid", res.code, res.err)
	}
	if !strings.Contains(res.err.Error(), "rank-0.log exists") {
		t.Errorf("error %q should name the existing log", res.err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("a rank started although the logs exist")
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "rank-1.log")); !bytes.Equal(before, after) {
		t.Errorf("rank-1.log changed: %q", after)
	}
	if _, err := os.Stat(filepath.Join(dir, "rank-2.log")); err == nil {
		t.Errorf("rank-2.log created by a refused run")
	}
}

func TestRunInvalid(t *testing.T) {
	t.Parallel()
	noexec := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noShebang := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(noShebang, []byte("echo hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		o       Options
		code    int
		invalid bool
		msg     string
	}{
		{"no ranks", Options{N: 0, Cmd: "true"}, 2, true, "need at least 1 rank, got 0"},
		{"negative ranks", Options{N: -1, Cmd: "true"}, 2, true, "need at least 1 rank, got -1"},
		{"no command", Options{N: 1}, 2, true, "no command given"},
		{"bad port", Options{N: 1, Cmd: "true", MasterPort: 70000}, 2, true, "master port 70000 out of range 1-65535"},
		{"negative grace", Options{N: 1, Cmd: "true", Grace: -time.Second}, 2, true, "grace period -1s is negative"},
		{"not found", Options{N: 2, Cmd: "no-such-program-xyz"}, 127, false, "no-such-program-xyz: executable file not found in $PATH"},
		{"not executable", Options{N: 2, Cmd: noexec}, 126, false, noexec + ": permission denied"},
		{"a script without #!", Options{N: 2, Cmd: noShebang}, 126, false,
			"starting rank 0: fork/exec " + noShebang + ": exec format error (a script needs a first line naming its interpreter, such as #!/bin/sh)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runLocal(t, context.Background(), tt.o)
			if res.code != tt.code || res.err == nil || errors.Is(res.err, launch.ErrInvalid) != tt.invalid {
				t.Fatalf("code %d, err %v; want %d, invalid %v", res.code, res.err, tt.code, tt.invalid)
			}
			if res.err.Error() != tt.msg {
				t.Errorf("error %q, want %q", res.err, tt.msg)
			}
			if res.stdout != "" || res.stderr != "" {
				t.Errorf("output %q %q, want none", res.stdout, res.stderr)
			}
		})
	}
}
