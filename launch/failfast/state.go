// Package failfast ends a whole job promptly when one rank fails, for
// launchers that do not (MPICH's and Intel MPI's Hydra wait for every rank,
// so a PyTorch rank that raises leaves the others in their collective until
// its timeout). batchkit exec runs the program as a child instead of
// exec'ing it, and the ranks' wrappers watch each other: every wrapper keeps
// one authenticated TCP connection to rank 0's wrapper (the hub); a wrapper
// whose child exits non-zero or dies by a signal tells the hub, which tells
// all others; they stop their children (SIGTERM, SIGKILL after a grace
// period) and exit with the failing rank's status. A child that exits 0
// stops nobody.
//
// State is the pure state machine, one per wrapper, table-tested; Run is
// the edge (child process, sockets, signals, timers).
package failfast

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Phase is where a wrapper is in its life.
type Phase int

const (
	Running  Phase = iota // the child runs, nobody failed
	Stopping              // a rank failed: this child is being stopped
	Draining              // the child has exited; the wrapper waits for the peers to settle (hub) or to join the hub (peer)
	Finished              // the wrapper may exit with State.Code
)

// EventKind is what happened to a wrapper.
type EventKind int

const (
	ChildExited EventKind = iota // this rank's child exited with Status
	PeerJoined                   // hub: rank Rank's wrapper connected and proved the token
	PeerDone                     // hub: rank Rank's child exited 0
	PeerFailed                   // hub: rank Rank's child failed with Status
	PeerLost                     // rank Rank's connection ended without a word (at a peer: the hub's)
	Stop                         // peer: the hub says rank Rank failed with Status
	// JoinClosed: at the hub, the time for peers to join is over; at a
	// peer, it could not join the hub. Nobody waits for a rank that never
	// joined after this.
	JoinClosed
	// Interrupted: a signal or the end of the context came. Once the child
	// has exited, nothing is left to stop: the wait for the others ends.
	Interrupted
)

// Event is one input to Step.
type Event struct {
	Kind   EventKind
	Rank   int
	Status int
}

// ActionKind is what the edge must do.
type ActionKind int

const (
	Report    ActionKind = iota // peer → hub: this child exited with Status (done when 0)
	Tell                        // hub → rank Rank: rank Failure.Rank failed; stop
	KillChild                   // stop this rank's child: SIGTERM, then SIGKILL after the grace period
	Announce                    // print Failure's line: this rank failed; the others are being stopped
	Exit                        // finished: exit with Status
)

// Action is one output of Step.
type Action struct {
	Kind   ActionKind
	Rank   int
	Status int
}

// Lost is the status of a rank whose wrapper vanished without saying how
// its child ended (killed, its node gone).
const Lost = -1

// Failure is the first rank that failed, as this wrapper learned it.
type Failure struct {
	Rank   int
	Status int // Lost when unknown
}

// Line is the one line a wrapper prints when it stops its child (self
// false) or when its own child failed (self true).
func (f Failure) Line(self bool) string {
	what := fmt.Sprintf("rank %d exited with status %d", f.Rank, f.Status)
	if f.Status == Lost {
		what = fmt.Sprintf("rank %d's batchkit exec vanished", f.Rank)
	}
	if self {
		return "batchkit: " + what + "; stopping the other ranks"
	}
	return "batchkit: " + what + "; stopping this rank"
}

// Code is the exit status for a rank stopped because of f. Hydra ORs its
// ranks' statuses into its own, so a stopped rank exits with the failing
// rank's status: the launcher then exits with exactly that status.
func (f Failure) Code() int {
	if f.Status <= 0 {
		return 1
	}
	return f.Status
}

// peer is the hub's view of one other rank.
type peer int

const (
	joined  peer = iota + 1
	settled      // done, failed or lost: nothing more to wait for
)

// State is one wrapper's state machine. The zero value is not ready: use
// NewState.
type State struct {
	Rank    int
	Size    int
	Phase   Phase
	Failure *Failure     // nil until some rank failed
	Code    int          // the exit status, once Finished
	peers   map[int]peer // the hub's peers; a peer's hub under key 0
	// closed: see JoinClosed.
	closed bool
}

// NewState is the machine of rank of size at start, its child running.
func NewState(rank, size int) *State {
	return &State{Rank: rank, Size: size, Phase: Running, peers: map[int]peer{}}
}

func (s *State) hub() bool { return s.Rank == 0 }

// Step applies e and says what to do.
func (s *State) Step(e Event) []Action {
	if s.Phase == Finished {
		return nil
	}
	switch e.Kind {
	case ChildExited:
		return s.childExited(e.Status)
	case Interrupted:
		if s.Phase != Draining {
			return nil // the edge passes it to the child
		}
		s.Phase = Finished
		return []Action{{Kind: Exit, Status: s.Code}}
	}
	if s.hub() {
		return s.hubStep(e)
	}
	return s.peerStep(e)
}

// childExited: a peer reports and finishes; the hub tells the others if
// its child failed and drains.
func (s *State) childExited(status int) []Action {
	var acts []Action
	code := status
	switch {
	case s.Failure != nil:
		code = s.Failure.Code() // stopped: the failing rank's status
	case status != 0:
		s.Failure = &Failure{Rank: s.Rank, Status: status}
		if s.hub() { // a peer announces when it reports
			acts = append(acts, Action{Kind: Announce, Rank: s.Rank, Status: status})
			acts = append(acts, s.tellAll(-1)...)
		}
	}
	s.Code = code
	s.Phase = Draining
	if !s.hub() {
		return append(acts, s.peerFinish()...)
	}
	return append(acts, s.maybeFinish()...)
}

// peerFinish reports a peer's exit to the hub and ends it. An exit before
// the peer has joined waits for the join (or its end): a rank that fails
// at once must still stop the others, and the hub waits for every rank.
func (s *State) peerFinish() []Action {
	own := s.Failure != nil && s.Failure.Rank == s.Rank
	if s.peers[0] != joined && !s.closed {
		return nil
	}
	var acts []Action
	if own {
		acts = append(acts, Action{Kind: Announce, Rank: s.Rank, Status: s.Code})
	}
	if s.Failure == nil || own {
		acts = append(acts, Action{Kind: Report, Rank: s.Rank, Status: s.Code})
	}
	s.Phase = Finished
	return append(acts, Action{Kind: Exit, Status: s.Code})
}

// hubStep is the hub's answer to its peers.
func (s *State) hubStep(e Event) []Action {
	switch e.Kind {
	case PeerJoined:
		s.peers[e.Rank] = joined
		if s.Failure != nil { // joined late: stop it too
			return []Action{{Kind: Tell, Rank: e.Rank, Status: s.Failure.Status}}
		}
		return nil
	case PeerDone:
		s.peers[e.Rank] = settled
		return s.maybeFinish()
	case JoinClosed:
		s.closed = true
		return s.maybeFinish()
	case PeerFailed, PeerLost:
		if s.peers[e.Rank] == settled { // a connection closing after its report
			return nil
		}
		s.peers[e.Rank] = settled
		status := e.Status
		if e.Kind == PeerLost {
			status = Lost
		}
		return append(s.fail(e.Rank, status), s.maybeFinish()...)
	}
	return nil
}

// fail records rank's failure, unless one came first, and stops everyone.
func (s *State) fail(rank, status int) []Action {
	if s.Failure != nil {
		return nil
	}
	s.Failure = &Failure{Rank: rank, Status: status}
	acts := s.tellAll(rank)
	if s.Phase == Running {
		s.Phase = Stopping
		acts = append(acts, Action{Kind: KillChild, Rank: rank, Status: status})
	}
	return acts
}

// tellAll tells every joined, unsettled peer but except to stop.
func (s *State) tellAll(except int) []Action {
	var acts []Action
	for r := 1; r <= maxKey(s.peers); r++ {
		if r != except && s.peers[r] == joined {
			acts = append(acts, Action{Kind: Tell, Rank: r, Status: s.Failure.Status})
		}
	}
	return acts
}

func maxKey(m map[int]peer) int {
	n := 0
	for k := range m {
		n = max(n, k)
	}
	return n
}

// Unjoined is who a wrapper whose child has exited waits for without a
// word from them: at the hub the ranks that have not joined (the time to
// join is open), at a peer the hub it could not join yet (rank 0). The
// edge says so, or the wait would look like a hang.
func (s *State) Unjoined() []int {
	if s.Phase != Draining || s.closed {
		return nil
	}
	if !s.hub() {
		if s.peers[0] != joined {
			return []int{0}
		}
		return nil
	}
	var ranks []int
	for r := 1; r < s.Size; r++ {
		if _, ok := s.peers[r]; !ok {
			ranks = append(ranks, r)
		}
	}
	return ranks
}

// WaitLine says why a wrapper whose child exited with status still waits,
// for how long at most, for whom (Unjoined) and at which address (the
// hub's).
func WaitLine(rank, status int, unjoined []int, wait time.Duration, addr string) string {
	const off = "BATCHKIT_FAIL_FAST=0 turns the watch off"
	if rank != 0 {
		return fmt.Sprintf("batchkit exec: rank %d: the program exited with status %d; waiting up to %s to tell rank 0's batchkit exec at %s, which has not answered (does rank 0 run under batchkit exec? %s)",
			rank, status, wait, addr, off)
	}
	return fmt.Sprintf("batchkit exec: rank 0: the program exited with status %d; waiting up to %s for rank(s) %s to join, to stop them if one fails (do they run under batchkit exec? %s)",
		status, wait, joinInts(unjoined), off)
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// maybeFinish ends the hub once its child has exited and every peer has
// settled (those that never joined count once the join is closed): until
// then a peer may still fail, or join late, and need telling.
func (s *State) maybeFinish() []Action {
	if s.Phase != Draining {
		return nil
	}
	n := 0
	for _, p := range s.peers {
		if p != settled {
			return nil
		}
		n++
	}
	if n < s.Size-1 && !s.closed {
		return nil
	}
	s.Phase = Finished
	return []Action{{Kind: Exit, Status: s.Code}}
}

// peerStep is a peer's answer to the hub.
func (s *State) peerStep(e Event) []Action {
	switch e.Kind {
	case PeerJoined:
		s.peers[0] = joined
	case JoinClosed:
		s.closed = true
	}
	if s.Phase == Draining {
		return s.peerFinish()
	}
	if s.Phase != Running || (e.Kind != Stop && e.Kind != PeerLost) {
		return nil
	}
	status := e.Status
	if e.Kind == PeerLost {
		status = Lost
	}
	s.Failure = &Failure{Rank: e.Rank, Status: status}
	s.Phase = Stopping
	return []Action{{Kind: KillChild, Rank: e.Rank, Status: status}}
}
