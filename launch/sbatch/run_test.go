package sbatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/launch"
)

// fakeSbatch puts an sbatch on PATH that saves the script it reads and
// its arguments in dir, prints $FAKE_OUT, sleeps with $FAKE_SLOW and, with --wait, exits
// $FAKE_JOB (the job's code); without, $FAKE_EXIT with $FAKE_ERR on stderr.
func fakeSbatch(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
cat > "$FAKE_DIR/script"; echo "$@" > "$FAKE_DIR/args"
printf "$FAKE_OUT"
[ -n "$FAKE_SLOW" ] && { trap 'exit 42' TERM; touch "$FAKE_DIR/ready"; while :; do sleep 0.05; done; }
[ -n "$FAKE_ERR" ] && echo "$FAKE_ERR" >&2
case "$*" in *--wait*) [ -n "$FAKE_TRAP" ] && { trap 'exit 42' TERM; touch "$FAKE_DIR/ready"; while :; do sleep 0.05; done; }; exit ${FAKE_JOB:-0};; esac
exit ${FAKE_EXIT:-0}
`
	if err := os.WriteFile(filepath.Join(dir, "sbatch"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	t.Setenv("FAKE_DIR", dir)
	return dir
}

func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		wait     bool
		code     int
		stdout   string
		args     string
		errorMsg string // "" for none
	}{
		{"submitted", map[string]string{"FAKE_OUT": `123;cluster\n`}, false, 0, "123\n", "--parsable\n", ""},
		{"waited: the job's code", map[string]string{"FAKE_OUT": `124\n`, "FAKE_JOB": "3"}, true, 3, "124\n", "--parsable --wait\n", ""},
		{"sbatch refused", map[string]string{"FAKE_EXIT": "1", "FAKE_ERR": "sbatch: error: invalid partition"}, false, 1, "", "--parsable\n",
			"sbatch failed (exit 1): sbatch: error: invalid partition"},
		{"waited, no job id: sbatch's failure", map[string]string{"FAKE_JOB": "1"}, true, 1, "", "--parsable --wait\n", "sbatch failed (exit 1): exit status 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := fakeSbatch(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout bytes.Buffer
			code, err := Run(context.Background(), Plan{Text: "#!/bin/sh\necho job\n", Wait: tt.wait}, launch.IO{Stdout: &stdout}, nil)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
				var se *SubmitError
				if !errors.As(err, &se) || se.Code != code {
					t.Errorf("err %v: want a SubmitError with the code %d", err, code)
				}
			}
			args, _ := os.ReadFile(filepath.Join(dir, "args"))
			script, _ := os.ReadFile(filepath.Join(dir, "script"))
			got := []any{code, stdout.String(), string(args), string(script), gotErr}
			want := []any{tt.code, tt.stdout, tt.args, "#!/bin/sh\necho job\n", tt.errorMsg}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("code, stdout, args, script, error (-want +got):\n%s", diff)
			}
		})
	}
}

// A signal handed to Run reaches sbatch --wait, and sbatch submitting in
// a process group of its own (where a terminal's Ctrl-C does not reach it);
// sbatch not on PATH is 127.
func TestRunSignalsAndStart(t *testing.T) {
	for _, wait := range []bool{true, false} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) { testSignal(t, wait) })
	}
	t.Setenv("PATH", t.TempDir())
	code, err := Run(context.Background(), Plan{}, launch.IO{}, nil)
	var se *SubmitError
	if code != 127 || !errors.As(err, &se) || se.Code != 127 {
		t.Errorf("no sbatch: code %d, err %v; want 127, a SubmitError", code, err)
	}
}

func testSignal(t *testing.T, wait bool) {
	dir := fakeSbatch(t)
	t.Setenv("FAKE_OUT", `125\n`)
	t.Setenv("FAKE_TRAP", "1")
	if !wait {
		t.Setenv("FAKE_SLOW", "1")
	}
	sigs := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() {
		code, _ := Run(context.Background(), Plan{Wait: wait}, launch.IO{}, sigs)
		done <- code
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("fake sbatch did not start")
		}
	}
	sigs <- syscall.SIGTERM
	select {
	case code := <-done:
		if code != 42 {
			t.Errorf("code %d, want 42 from the trap", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the signal")
	}
}

// An sbatch that never answers (a hung slurmctld) is killed, with what it
// started, after the plan's timeout: code 1 and an error naming it. Only a
// submission is bounded; --wait takes as long as the job.
func TestRunTimeout(t *testing.T) {
	fakeSbatch(t)
	t.Setenv("FAKE_SLOW", "1")
	start := time.Now()
	code, err := Run(context.Background(), Plan{SubmitTimeout: 300 * time.Millisecond}, launch.IO{}, nil)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	var te *launch.TimeoutError
	if !errors.As(err, &te) {
		t.Errorf("err %v: want a launch.TimeoutError", err)
	}
	got := []any{code, fmt.Sprint(err)}
	want := []any{1, "sbatch --parsable: no answer within 300ms (killed it); the job may have been queued all the same: check squeue --me"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("code, error (-want +got):\n%s", diff)
	}
}
