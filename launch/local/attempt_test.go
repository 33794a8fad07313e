package local

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/launch"
)

// The attempt's steps, without processes: each case feeds events to an
// attempt of n ranks and checks its state, what it said and the outcome.
func TestAttemptSteps(t *testing.T) {
	exit := func(rank, code int) func(*attempt) {
		return func(a *attempt) { a.exited(exitEvent{rank: rank, code: code, exit: code}) }
	}
	killedBy := func(rank int, sig syscall.Signal) func(*attempt) {
		return func(a *attempt) { a.exited(exitEvent{rank: rank, code: 128 + int(sig), exit: -1, signal: sig}) }
	}
	forward := func(sig syscall.Signal) func(*attempt) { return func(a *attempt) { a.forward(sig) } }
	graceOver := func(a *attempt) { a.kill() }
	type state struct {
		Phase    phase
		TermSent bool
		Said     []string
		Outcome  Outcome
	}
	tests := []struct {
		name   string
		n      int
		events []func(*attempt)
		want   state
	}{
		{"all succeed", 2, []func(*attempt){exit(0, 0), exit(1, 0)},
			state{Phase: running, Outcome: Outcome{Rank: -1}}},
		{"a failure stops the others", 3, []func(*attempt){exit(2, 3)},
			state{Phase: stopping, TermSent: true, Said: []string{"rank 2 exited with code 3; stopping 2 other ranks"},
				Outcome: Outcome{Code: 3, Rank: 2, Exit: 3}}},
		{"the last rank fails: nothing to stop", 1, []func(*attempt){exit(0, 1)},
			state{Phase: stopping, TermSent: true, Said: []string{"rank 0 exited with code 1"},
				Outcome: Outcome{Code: 1, Rank: 0, Exit: 1}}},
		{"killed: its signal named, the first failure is the cause", 2, []func(*attempt){killedBy(1, syscall.SIGKILL), exit(0, 143)},
			state{Phase: stopping, TermSent: true, Said: []string{"rank 1 was killed by SIGKILL (code 137); stopping 1 other rank"},
				Outcome: Outcome{Code: 137, Rank: 1, Exit: -1, Signal: syscall.SIGKILL}}},
		{"a forwarded signal: announced once, failures after it are not", 2,
			[]func(*attempt){forward(syscall.SIGINT), forward(syscall.SIGINT), exit(0, 0), exit(1, 130)},
			state{Phase: stopping, Said: []string{"got SIGINT; forwarding it to 2 ranks"},
				Outcome: Outcome{Code: 130, Rank: 1, Exit: 130, Stopped: true}}},
		{"a forwarded signal the ranks handle: 128+S", 2, []func(*attempt){forward(syscall.SIGUSR1), exit(0, 0), exit(1, 0)},
			state{Phase: stopping, Said: []string{"got SIGUSR1; forwarding it to 2 ranks"},
				Outcome: Outcome{Code: 128 + int(syscall.SIGUSR1), Rank: -1, Stopped: true}}},
		{"the grace period ends: SIGKILL", 2, []func(*attempt){exit(0, 1), graceOver},
			state{Phase: killed, TermSent: true, Said: []string{"rank 0 exited with code 1; stopping 1 other rank"},
				Outcome: Outcome{Code: 1, Rank: 0, Exit: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var said bytes.Buffer
			r := &runner{Plan: Plan{Options: Options{N: tt.n, Grace: time.Hour}}, io: launch.IO{Stderr: &said}}
			a := newAttempt(r)
			a.running = tt.n
			for _, ev := range tt.events {
				ev(a)
			}
			got := state{Phase: a.phase, TermSent: a.termSent, Outcome: outcome(a.failed, a.stopSig)}
			for _, l := range strings.Split(strings.TrimSpace(said.String()), "\n") {
				if l != "" {
					got.Said = append(got.Said, strings.TrimPrefix(l, "batchkit: "))
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !a.groupsGone() {
				t.Error("no process groups, yet not gone")
			}
		})
	}
}

func TestNewPlan(t *testing.T) {
	tests := []struct {
		name    string
		o       Options
		want    Plan
		wantErr string // a launch.ErrInvalid error's text
	}{
		{"argv", Options{N: 2, Cmd: "python3", Args: []string{"train.py", "-n", "5"}},
			Plan{Options: Options{N: 2, Cmd: "python3", Args: []string{"train.py", "-n", "5"}}, Argv: []string{"python3", "train.py", "-n", "5"}}, ""},
		{"tee logs", Options{N: 2, Cmd: "x", TeeDir: "logs"},
			Plan{Options: Options{N: 2, Cmd: "x", TeeDir: "logs"}, Argv: []string{"x"}, Tees: []string{"logs/rank-0.log", "logs/rank-1.log"}}, ""},
		{"no ranks", Options{N: 0, Cmd: "true"}, Plan{}, "need at least 1 rank, got 0"},
		{"no command", Options{N: 1}, Plan{}, "no command given"},
		{"negative grace", Options{N: 1, Cmd: "true", Grace: -time.Second}, Plan{}, "grace period -1s is negative"},
		{"bad port", Options{N: 1, Cmd: "true", MasterPort: 70000}, Plan{}, "master port 70000 out of range 1-65535"},
		{"negative restarts", Options{N: 1, Cmd: "true", MaxRestarts: -1}, Plan{}, "max restarts -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewPlan(tt.o)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, launch.ErrInvalid) {
					t.Fatalf("err = %v, want %q (launch.ErrInvalid)", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
