package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStartCode(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lookup := func(name string) error { _, err := exec.LookPath(name); return err }
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"not on PATH", lookup("no-such-program-xyz"), 127},
		{"no such file", lookup(filepath.Join(dir, "nope")), 127},
		{"not executable", lookup(noexec), 126},
		{"a directory", lookup(dir), 126},
		{"no #! line", &os.PathError{Op: "fork/exec", Path: "x", Err: syscall.ENOEXEC}, 126},
		{"arguments too long", &os.PathError{Op: "fork/exec", Path: "x", Err: syscall.E2BIG}, 126},
		{"out of processes: the launcher's failure", &os.PathError{Op: "fork/exec", Path: "x", Err: syscall.EAGAIN}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StartCode(tt.err); got != tt.want {
				t.Errorf("StartCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
			se := Started(tt.err).(*StartError)
			if se.Code != tt.want || strings.HasPrefix(se.Error(), "exec: ") {
				t.Errorf("Started(%v) = %q, code %d", tt.err, se, se.Code)
			}
		})
	}
	if Started(nil) != nil {
		t.Error("Started(nil) is not nil")
	}
}

func TestWaitStatus(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   int
	}{
		{"success", "exit 0", 0},
		{"exit code", "exit 7", 7},
		{"killed", "kill -KILL $$", 128 + 9},
		{"terminated", "kill -TERM $$", 128 + 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, err := WaitStatus(exec.Command("sh", "-c", tt.script).Run())
			if code != tt.want || err != nil {
				t.Errorf("code %d, err %v; want %d", code, err, tt.want)
			}
		})
	}
	if code, err := WaitStatus(errors.New("wait failed")); code != 1 || err == nil {
		t.Errorf("a failed wait: code %d, err %v; want 1 and the error", code, err)
	}
}

func TestInvalid(t *testing.T) {
	base := errors.New("base")
	for _, err := range []error{Invalid("bad %s", "x"), Bad(fmt.Errorf("wrapped: %w", base))} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%v is not ErrInvalid", err)
		}
	}
	if got := Bad(fmt.Errorf("wrapped: %w", base)); !errors.Is(got, base) || got.Error() != "wrapped: base" {
		t.Errorf("Bad lost the chain or changed the message: %v", got)
	}
	if Bad(nil) != nil {
		t.Error("Bad(nil) is not nil")
	}
}

// Only a key's signal can have come from the terminal, and only when stdin
// is one (never in tests).
func TestFromTerminal(t *testing.T) {
	got := map[string]bool{}
	for _, s := range Signals {
		got[SignalName(s.(syscall.Signal))] = FromTerminal(s, os.Stdin) || FromTerminal(s, strings.NewReader(""))
	}
	want := map[string]bool{"SIGINT": false, "SIGTERM": false, "SIGHUP": false, "SIGQUIT": false, "SIGUSR1": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// RunChild forwards a signal and reports the child's status; cancelling
// the context sends SIGTERM and returns the context's error.
func TestRunChild(t *testing.T) {
	const script = `trap 'echo got; exit 42' TERM USR1; echo ready; while :; do sleep 0.05; done`
	tests := []struct {
		name    string
		stop    func(sigs chan<- os.Signal, cancel func())
		want    int
		wantErr error
	}{
		{"signal forwarded", func(sigs chan<- os.Signal, _ func()) { sigs <- syscall.SIGUSR1 }, 42, nil},
		{"context cancelled", func(_ chan<- os.Signal, cancel func()) { cancel() }, 42, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sigs := make(chan os.Signal, 1)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", script)
			cmd.Stdout = w
			done := make(chan struct{})
			var code int
			go func() {
				defer close(done)
				code, err = RunChild(ctx, cmd, sigs)
				w.Close()
			}()
			buf := make([]byte, 6)
			if _, err := r.Read(buf); err != nil || string(buf) != "ready\n" {
				t.Fatalf("child did not start: %q %v", buf, err)
			}
			tt.stop(sigs, cancel)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("RunChild did not return")
			}
			var rest bytes.Buffer
			rest.ReadFrom(r)
			if code != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) || rest.String() != "got\n" {
				t.Errorf("code %d, err %v, output %q; want %d, %v, got", code, err, rest.String(), tt.want, tt.wantErr)
			}
		})
	}
	_, err := RunChild(context.Background(), exec.Command("no-such-program-xyz"), nil)
	var se *StartError
	if !errors.As(err, &se) || se.Code != 127 {
		t.Errorf("not found: %v, want a StartError with code 127", err)
	}
}
