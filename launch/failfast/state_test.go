package failfast

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestState(t *testing.T) {
	ev := func(k EventKind, rank, status int) Event { return Event{Kind: k, Rank: rank, Status: status} }
	act := func(k ActionKind, rank, status int) Action { return Action{Kind: k, Rank: rank, Status: status} }
	tests := []struct {
		name       string
		rank, size int
		events     []Event
		want       []Action
		phase      Phase
		code       int
	}{
		{"hub: all exit 0", 0, 3,
			[]Event{ev(PeerJoined, 1, 0), ev(PeerJoined, 2, 0), ev(PeerDone, 1, 0), ev(ChildExited, 0, 0), ev(PeerDone, 2, 0)},
			[]Action{act(Exit, 0, 0)}, Finished, 0},
		{"hub: a peer fails: tell the others, stop own child", 0, 3,
			[]Event{ev(PeerJoined, 1, 0), ev(PeerJoined, 2, 0), ev(PeerFailed, 1, 3)},
			[]Action{act(Tell, 2, 3), act(KillChild, 1, 3)}, Stopping, 0},
		{"hub: stopped child exits with the failing rank's status once all settle", 0, 3,
			[]Event{ev(PeerJoined, 1, 0), ev(PeerJoined, 2, 0), ev(PeerFailed, 1, 3), ev(ChildExited, 0, 143), ev(PeerLost, 2, 0)},
			[]Action{act(Tell, 2, 3), act(KillChild, 1, 3), act(Exit, 0, 3)}, Finished, 3},
		{"hub: own child fails: announce, tell all", 0, 3,
			[]Event{ev(PeerJoined, 1, 0), ev(PeerJoined, 2, 0), ev(ChildExited, 0, 5)},
			[]Action{act(Announce, 0, 5), act(Tell, 1, 5), act(Tell, 2, 5)}, Draining, 5},
		{"hub: a peer joining after the failure is told", 0, 3,
			[]Event{ev(PeerJoined, 1, 0), ev(ChildExited, 0, 5), ev(PeerJoined, 2, 0)},
			[]Action{act(Announce, 0, 5), act(Tell, 1, 5), act(Tell, 2, 5)}, Draining, 5},
		{"hub: exit 0 early stops nobody and waits for the peers", 0, 3,
			[]Event{ev(PeerJoined, 1, 0), ev(PeerJoined, 2, 0), ev(ChildExited, 0, 0), ev(PeerDone, 1, 0)},
			nil, Draining, 0},
		{"hub: a peer that never joined is not waited for once the join closes", 0, 3,
			[]Event{ev(PeerJoined, 1, 0), ev(ChildExited, 0, 0), ev(PeerDone, 1, 0), ev(JoinClosed, 0, 0)},
			[]Action{act(Exit, 0, 0)}, Finished, 0},
		{"hub: a vanished peer counts as failed", 0, 3,
			[]Event{ev(PeerJoined, 1, 0), ev(PeerJoined, 2, 0), ev(PeerLost, 2, 0)},
			[]Action{act(Tell, 1, Lost), act(KillChild, 2, Lost)}, Stopping, 0},
		{"hub: a connection closing after its report is no failure", 0, 3,
			[]Event{ev(PeerJoined, 1, 0), ev(PeerDone, 1, 0), ev(PeerLost, 1, 0)},
			nil, Running, 0},
		{"hub: only the first failure counts", 0, 3,
			[]Event{ev(PeerJoined, 1, 0), ev(PeerJoined, 2, 0), ev(PeerFailed, 1, 3), ev(PeerFailed, 2, 4)},
			[]Action{act(Tell, 2, 3), act(KillChild, 1, 3)}, Stopping, 0},
		{"peer: exit 0 reports done", 1, 3,
			[]Event{ev(PeerJoined, 0, 0), ev(ChildExited, 0, 0)},
			[]Action{act(Report, 1, 0), act(Exit, 0, 0)}, Finished, 0},
		{"peer: failure reports and announces", 2, 3,
			[]Event{ev(PeerJoined, 0, 0), ev(ChildExited, 0, 137)},
			[]Action{act(Announce, 2, 137), act(Report, 2, 137), act(Exit, 0, 137)}, Finished, 137},
		{"peer: a failure before joining waits for the join", 1, 3,
			[]Event{ev(ChildExited, 0, 3), ev(PeerJoined, 0, 0)},
			[]Action{act(Announce, 1, 3), act(Report, 1, 3), act(Exit, 0, 3)}, Finished, 3},
		{"peer: or for its end", 1, 3,
			[]Event{ev(ChildExited, 0, 3), ev(JoinClosed, 0, 0)},
			[]Action{act(Announce, 1, 3), act(Report, 1, 3), act(Exit, 0, 3)}, Finished, 3},
		{"peer: told to stop", 1, 3,
			[]Event{ev(PeerJoined, 0, 0), ev(Stop, 2, 3), ev(ChildExited, 0, 143)},
			[]Action{act(KillChild, 2, 3), act(Exit, 0, 3)}, Finished, 3},
		{"peer: the hub vanishing stops it", 1, 3,
			[]Event{ev(PeerJoined, 0, 0), ev(PeerLost, 0, 0), ev(ChildExited, 0, 143)},
			[]Action{act(KillChild, 0, Lost), act(Exit, 0, 1)}, Finished, 1},
		{"hub: a signal while it waits for the peers ends the wait", 0, 3,
			[]Event{ev(PeerJoined, 1, 0), ev(ChildExited, 0, 0), ev(Interrupted, 0, 0)},
			[]Action{act(Exit, 0, 0)}, Finished, 0},
		{"hub: a signal while its child runs is the child's", 0, 3,
			[]Event{ev(PeerJoined, 1, 0), ev(Interrupted, 0, 0)},
			nil, Running, 0},
		{"peer: a signal while it waits to join ends the wait", 1, 3,
			[]Event{ev(ChildExited, 0, 3), ev(Interrupted, 0, 0)},
			[]Action{act(Exit, 0, 3)}, Finished, 3},
		{"peer: a stop after its own exit changes nothing", 1, 3,
			[]Event{ev(PeerJoined, 0, 0), ev(ChildExited, 0, 0), ev(Stop, 2, 3)},
			[]Action{act(Report, 1, 0), act(Exit, 0, 0)}, Finished, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewState(tt.rank, tt.size)
			var got []Action
			for _, e := range tt.events {
				got = append(got, s.Step(e)...)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if s.Phase != tt.phase || s.Code != tt.code {
				t.Errorf("phase %d code %d, want phase %d code %d", s.Phase, s.Code, tt.phase, tt.code)
			}
		})
	}
}

func TestFailureLine(t *testing.T) {
	got := []string{
		Failure{1, 3}.Line(true), Failure{1, 3}.Line(false), Failure{2, Lost}.Line(false),
	}
	want := []string{
		"batchkit: rank 1 exited with status 3; stopping the other ranks",
		"batchkit: rank 1 exited with status 3; stopping this rank",
		"batchkit: rank 2's batchkit exec vanished; stopping this rank",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

// Who a wrapper whose child exited waits for without a word from them.
func TestUnjoined(t *testing.T) {
	ev := func(k EventKind, rank, status int) Event { return Event{Kind: k, Rank: rank, Status: status} }
	for _, tt := range []struct {
		name       string
		rank, size int
		events     []Event
		want       []int
	}{
		{"hub, child running", 0, 3, []Event{ev(PeerJoined, 1, 0)}, nil},
		{"hub, child exited, rank 2 never joined", 0, 3, []Event{ev(PeerJoined, 1, 0), ev(ChildExited, 0, 0)}, []int{2}},
		{"hub, every peer joined (still running)", 0, 3, []Event{ev(PeerJoined, 1, 0), ev(PeerJoined, 2, 0), ev(ChildExited, 0, 0)}, nil},
		{"hub, the join closed", 0, 3, []Event{ev(ChildExited, 0, 0), ev(JoinClosed, 0, 0)}, nil},
		{"peer, not joined", 1, 3, []Event{ev(ChildExited, 0, 0)}, []int{0}},
		{"peer, running", 1, 3, nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := NewState(tt.rank, tt.size)
			for _, e := range tt.events {
				s.Step(e)
			}
			if diff := cmp.Diff(tt.want, s.Unjoined()); diff != "" {
				t.Errorf("Unjoined (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWaitLine(t *testing.T) {
	got := []string{WaitLine(1, 0, []int{0}, 9*time.Second, "node1:4711"), WaitLine(0, 3, []int{2, 3}, 110*time.Second, "node1:4711")}
	want := []string{
		"batchkit exec: rank 1: the program exited with status 0; waiting up to 9s to tell rank 0's batchkit exec at node1:4711, which has not answered (does rank 0 run under batchkit exec? BATCHKIT_FAIL_FAST=0 turns the watch off)",
		"batchkit exec: rank 0: the program exited with status 3; waiting up to 1m50s for rank(s) 2,3 to join, to stop them if one fails (do they run under batchkit exec? BATCHKIT_FAIL_FAST=0 turns the watch off)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
