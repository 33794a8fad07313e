package main

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchkit/batchkit/trainer"
	"github.com/batchkit/batchkit/trainer/job"
)

// runTrain runs batchkit train --epochs 1 in this process (a world of one)
// with more args; stdout and stderr are returned, or stdout goes to the
// file given.
func runTrain(stdout *os.File, args ...string) (code int, out, errOut string) {
	var o, e bytes.Buffer
	var w io.Writer = &o
	if stdout != nil {
		w = stdout
	}
	code = Main(append([]string{"batchkit", "train", "--epochs", "1"}, args...), w, &e)
	return code, o.String(), e.String()
}

// digitsRunID is the run id of the default flags with seed, in a world of
// one.
func digitsRunID(t *testing.T, seed uint64) string {
	t.Helper()
	d, err := trainer.Digits()
	if err != nil {
		t.Fatal(err)
	}
	train, _, err := trainer.Split(d)
	if err != nil {
		t.Fatal(err)
	}
	return job.RunID([]int{64, 64, 10}, train, 1, 32, seed)
}

// metricsEpochs reads a metrics file: its lines' epochs, checking that each
// is a whole line of run.
func metricsEpochs(t *testing.T, path, run string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var epochs []int
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if l == "" {
			continue
		}
		var e struct {
			Run   string
			Epoch int
		}
		if !strings.HasSuffix(l, "\n") || json.Unmarshal([]byte(l), &e) != nil || e.Run != run {
			t.Fatalf("%s: line %q is not a whole metrics line of run %s", path, l, run)
		}
		epochs = append(epochs, e.Epoch)
	}
	return epochs
}

// wantRefused checks one refusal: exit 2, one line naming path that says
// what --force does, nothing on stdout (no step was run).
func wantRefused(t *testing.T, code int, stdout, stderr, path, says string) {
	t.Helper()
	if code != exitUsage {
		t.Errorf("exit code %d, want %d", code, exitUsage)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"`+path+`"`) || !strings.Contains(lines[0], says) {
		t.Errorf("stderr %q: want one line naming %q and saying %q", stderr, path, says)
	}
	if stdout != "" {
		t.Errorf("stdout %q: want nothing, the refusal comes before the first step", stdout)
	}
}

// A file that is not this run's metrics is refused and left byte for byte
// as it was: a CSV, a link to one (judged by its target; the link stays), and
// another run's metrics. train --metrics victim.csv used to make the CSV one
// JSON line.
func TestMetricsRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "victim.csv")
	data := []byte("5.1,3.5,1.4,0.2,0\n4.9,3.0,1.4,0.2,0\n")
	if err := os.WriteFile(csv, data, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink("victim.csv", link); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.jsonl") // seed 2's
	if code, _, stderr := runTrain(nil, "--seed", "2", "--metrics", other); code != 0 {
		t.Fatalf("seed 2: exit %d: %s", code, stderr)
	}
	otherData, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty") // nothing to lose: allowed
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, says string
		want             []byte
	}{
		{"CSV", csv, "file exists and is not this run's metrics (use --force to replace it)", data},
		{"link to the CSV", link, "file exists and is not this run's metrics (use --force to replace it)", data},
		{"another run's metrics", other, "holds another run's metrics (another model, data, world size, batch size or seed; use --force to replace it)", otherData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runTrain(nil, "--metrics", tc.path)
			wantRefused(t, code, stdout, stderr, tc.path, tc.says)
			if b, err := os.ReadFile(tc.path); err != nil || !bytes.Equal(b, tc.want) {
				t.Errorf("%s is now %q (%v), want it untouched: %q", tc.path, b, err, tc.want)
			}
		})
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode().Type() != fs.ModeSymlink {
		t.Errorf("link.jsonl is now %v (%v), want the link", fi.Mode(), err)
	}
	if code, _, stderr := runTrain(nil, "--metrics", empty); code != 0 {
		t.Errorf("empty file: exit %d: %s", code, stderr)
	}
	if got := metricsEpochs(t, empty, digitsRunID(t, 1)); !slices.Equal(got, []int{1}) {
		t.Errorf("empty file: epochs %v, want [1]", got)
	}
}

// --force replaces what is not this run's metrics: the CSV, through a link
// (which stays a link), another run's metrics; the file holds this run's
// lines only.
func TestMetricsForceReplaces(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "victim.csv")
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink("victim.csv", link); err != nil {
		t.Fatal(err)
	}
	run := digitsRunID(t, 1)
	for _, path := range []string{csv, link} {
		if err := os.WriteFile(csv, []byte("1,2,0\n3,4,1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := runTrain(nil, "--metrics", path, "--force"); code != 0 {
			t.Fatalf("--metrics %s --force: exit %d: %s", path, code, stderr)
		}
		if got := metricsEpochs(t, csv, run); !slices.Equal(got, []int{1}) {
			t.Errorf("--metrics %s --force: epochs %v, want [1]", path, got)
		}
		if fi, err := os.Stat(csv); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("--metrics %s --force: mode %v (%v), want 0600 kept", path, fi.Mode(), err)
		}
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode().Type() != fs.ModeSymlink {
		t.Errorf("link.jsonl is now %v (%v), want the link", fi.Mode(), err)
	}
	// Another run's metrics: replaced, none of its lines kept.
	if code, _, stderr := runTrain(nil, "--metrics", csv, "--force", "--seed", "2", "--epochs", "2"); code != 0 {
		t.Fatalf("seed 2 --force: exit %d: %s", code, stderr)
	}
	if got := metricsEpochs(t, csv, digitsRunID(t, 2)); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("seed 2 over seed 1's metrics with --force: epochs %v, want [1 2]", got)
	}
}

// This run's own file is continued: resumed from a checkpoint, it keeps the
// epochs the checkpoint has (byte for byte) and loses what the killed run
// wrote past it (an epoch, a line cut short); the same command without a
// checkpoint starts it over. No --force needed for either.
func TestMetricsOwnFileContinued(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "m.jsonl")
	ck := filepath.Join(dir, "ck")
	run := digitsRunID(t, 1)
	if code, _, stderr := runTrain(nil, "--metrics", m, "--checkpoint-dir", ck); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr)
	}
	first, err := os.ReadFile(m)
	if err != nil {
		t.Fatal(err)
	}
	// What a run killed in epoch 3 after its epoch 2 line would have left.
	f, err := os.OpenFile(m, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"run":"` + run + `","epoch":2,"step":90,"loss":9}` + "\n" + `{"run":"` + run + `","epo`)
	f.Close()
	code, stdout, stderr := runTrain(nil, "--metrics", m, "--checkpoint-dir", ck, "--epochs", "3")
	if code != 0 || !strings.Contains(stdout, "train: resumed from ") {
		t.Fatalf("resumed run: exit %d, stdout %q: %s", code, stdout, stderr)
	}
	b, err := os.ReadFile(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, first) || bytes.Contains(b, []byte(`"loss":9}`)) {
		t.Errorf("resumed: metrics %q, want epoch 1's line %q kept and the killed run's epoch 2 gone", b, first)
	}
	if got := metricsEpochs(t, m, run); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("resumed: epochs %v, want [1 2 3]", got)
	}
	// The same command with no checkpoint (a requeued job killed before
	// its first one): this run's file, started over.
	if code, _, stderr := runTrain(nil, "--metrics", m); code != 0 {
		t.Fatalf("fresh run over its own metrics: exit %d: %s", code, stderr)
	}
	if got := metricsEpochs(t, m, run); !slices.Equal(got, []int{1}) {
		t.Errorf("fresh run: epochs %v, want [1]", got)
	}
}

// --metrics naming the file stdout goes to (or a link to it) writes the
// lines to stdout itself: what was written there before stays (it used to
// be truncated, and stdout's own writes then left a hole of NULs), and the
// lines come in order with the rest; --force changes nothing. "-" is
// stdout. /dev/stdout itself is train_usage.txtar's case: here it would be
// the test binary's stdout.
func TestMetricsStdoutNotTruncated(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.log")
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("earlier line\n")
	link := filepath.Join(dir, "link.log")
	if err := os.Symlink("out.log", link); err != nil {
		t.Fatal(err)
	}
	run := digitsRunID(t, 1)
	for _, args := range [][]string{{"--metrics", out}, {"--metrics", link, "--force"}} {
		code, _, stderr := runTrain(f, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	f.Close()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) == 0 || lines[0] != "earlier line" || bytes.IndexByte(b, 0) >= 0 {
		t.Fatalf("out.log %q: want the earlier line first and no NUL", b)
	}
	var n int
	for _, l := range lines {
		if strings.HasPrefix(l, `{"run":"`+run+`","epoch":1,`) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("out.log %q: want 2 metrics lines, one per run", b)
	}
	code, stdout, stderr := runTrain(nil, "--metrics", "-", "--format", "json")
	if code != 0 || !strings.HasPrefix(stdout, `{"run":"`+run+`","epoch":1,`) || !strings.Contains(stdout, "\n{\"test_accuracy\":") {
		t.Errorf("--metrics -: exit %d, stdout %q: want the epoch's line, then the summary (%s)", code, stdout, stderr)
	}
}

// What is not a regular file is refused at once, exit 2, and left as it
// is: a FIFO (no reader: opening it to write would block for ever), a link
// to one, a directory.
func TestMetricsRefusesNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	toFifo := filepath.Join(dir, "to-fifo")
	if err := os.Symlink("fifo", toFifo); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, kind string
		force            bool
		mode             fs.FileMode
	}{
		{"FIFO", fifo, "a FIFO", false, fs.ModeNamedPipe},
		{"FIFO, --force", fifo, "a FIFO", true, fs.ModeNamedPipe},
		{"link to a FIFO", toFifo, "a symbolic link to a FIFO", false, fs.ModeSymlink},
		{"directory", sub, "a directory", false, fs.ModeDir},
		{"directory, --force", sub, "a directory", true, fs.ModeDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--metrics", tc.path}
			if tc.force {
				args = append(args, "--force")
			}
			type result struct {
				code           int
				stdout, stderr string
			}
			done := make(chan result, 1)
			begin := time.Now()
			go func() {
				code, stdout, stderr := runTrain(nil, args...)
				done <- result{code, stdout, stderr}
			}()
			select {
			case r := <-done:
				wantRefused(t, r.code, r.stdout, r.stderr, tc.path, "is "+tc.kind+", not a regular file")
				if took := time.Since(begin); took > time.Second {
					t.Errorf("refused after %v, want within a second", took)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("--metrics %s: no answer in 10 s (blocked opening it?)", tc.path)
			}
			if fi, err := os.Lstat(tc.path); err != nil || fi.Mode().Type() != tc.mode {
				t.Errorf("%s is now %v (%v), want it untouched", tc.path, fi.Mode(), err)
			}
		})
	}
	if entries, _ := os.ReadDir(sub); len(entries) != 0 {
		t.Errorf("the directory holds %d entries now, want none", len(entries))
	}
}
