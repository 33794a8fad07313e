package mpilaunch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/launch"
)

func TestRunExitStatus(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		argv      []string
		code      int
		startFail bool
	}{
		{"success", []string{"sh", "-c", "exit 0"}, 0, false},
		{"exit code", []string{"sh", "-c", "exit 7"}, 7, false},
		{"killed", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9, false},
		{"not found", []string{"no-such-launcher-xyz"}, 127, true},
		{"not executable", []string{noexec}, 126, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			code, err := runArgv(context.Background(), tt.argv, nil, launch.IO{Stdout: &out, Stderr: &out}, nil)
			var se *launch.StartError
			if tt.startFail != errors.As(err, &se) {
				t.Fatalf("err = %v, want a StartError: %v", err, tt.startFail)
			}
			if code != tt.code {
				t.Errorf("code %d, want %d (%s)", code, tt.code, out.String())
			}
		})
	}
}

// SIGINT and SIGTERM handed to Run reach the launcher, whose own exit
// status is returned. stdin is not a terminal here, so SIGINT is forwarded.
func TestRunForwardsSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			ready := filepath.Join(dir, "ready")
			script := `trap 'echo got-$1; exit 42' ` + strings.TrimPrefix(sigName(sig), "SIG") + `; touch "$0"; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; exit 9`
			var out bytes.Buffer
			done := make(chan int, 1)
			sigs := make(chan os.Signal, 1)
			go func() {
				code, err := runArgv(context.Background(), []string{"sh", "-c", script, ready, sigName(sig)}, nil, launch.IO{Stdout: &out, Stderr: &out}, sigs)
				if err != nil {
					t.Error(err)
				}
				done <- code
			}()
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("launcher did not start")
				}
				time.Sleep(10 * time.Millisecond)
			}
			sigs <- sig
			select {
			case code := <-done:
				if code != 42 {
					t.Errorf("code %d, want 42 from the trap; output %q", code, out.String())
				}
			case <-time.After(20 * time.Second):
				t.Fatal("launcher did not exit after the signal")
			}
		})
	}
}

func sigName(s syscall.Signal) string {
	if s == syscall.SIGINT {
		return "SIGINT"
	}
	return "SIGTERM"
}

// The launcher runs with the environment it is given (nil: this process's).
func TestRunEnv(t *testing.T) {
	t.Setenv("BATCHKIT_RUN_TEST_INHERITED", "from-parent")
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"inherited", nil, "from-parent|\n"},
		{"given", []string{"PATH=" + os.Getenv("PATH"), "BATCHKIT_RUN_TEST_GIVEN=x y"}, "|x y\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			code, err := runArgv(context.Background(), []string{"sh", "-c", `echo "$BATCHKIT_RUN_TEST_INHERITED|$BATCHKIT_RUN_TEST_GIVEN"`}, tt.env, launch.IO{Stdout: &out, Stderr: &out}, nil)
			if err != nil || code != 0 {
				t.Fatalf("code %d, err %v: %s", code, err, out.String())
			}
			if diff := cmp.Diff(tt.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

// Run writes a generated hostfile for the launcher and removes it after;
// a launcher not on PATH is 127 before anything is written.
func TestRunPlan(t *testing.T) {
	dir := t.TempDir()
	fake := `#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = -hostfile ] && { cat "$2"; echo "$2" > "$FAKE_DIR/name"; }; shift; done`
	if err := os.WriteFile(filepath.Join(dir, "mpirun_rsh"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	t.Setenv("FAKE_DIR", dir)
	p, err := NewPlan(Options{Flavor: "mvapich", Hosts: "n1:2,n2:2", MasterPort: 1234, Program: []string{"true"}}, machine(map[string]string{"mpirun_rsh": ""}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code, err := Run(context.Background(), p, launch.IO{Stdout: &out, Stderr: &out}, nil)
	if code != 0 || err != nil {
		t.Fatalf("code %d, err %v: %s", code, err, out.String())
	}
	if diff := cmp.Diff(p.Hostfile, out.String()); diff != "" {
		t.Errorf("the launcher's hostfile (-want +got):\n%s", diff)
	}
	name, _ := os.ReadFile(filepath.Join(dir, "name"))
	if _, err := os.Stat(strings.TrimSpace(string(name))); len(name) == 0 || err == nil {
		t.Errorf("hostfile %q not given or not removed", name)
	}

	p.Found, p.Spec.Binary = false, "/nonexistent/mpirun"
	code, err = Run(context.Background(), p, launch.IO{}, nil)
	if want := "/nonexistent/mpirun: no such launcher: give the path of an installed one with --mpirun PATH"; code != 127 || err == nil || err.Error() != want {
		t.Errorf("not found: code %d, err %v; want 127, %q", code, err, want)
	}
}
