package collective

import (
	"math/bits"
	"time"
)

// callTimes remembers how long the last timed calls of each size class
// took (a class is the bytes rounded down to a power of two) and which
// classes the MPI backend runs on its worker thread. A class goes there
// when callQuorum of its last callWindow timed calls took at least the
// limit, and comes back when as many took under four fifths of it; in
// between it stays where it is. Calls of 1-5 ms are faster on the caller's
// thread, longer ones on the worker. Measured in one process
// (TestMPIOverhead, Open MPI, 2 ranks, one size per launch, launches taking
// turns, 2026-12-02), every call handed over against the caller's thread:
// 4 MiB (1-2.8 ms calls) 0.94× C against 1.01× (medians of 6 launches
// each), 8 MiB (3.4-4.6 ms) 0.975× against 0.998× (5 each), but 16 MiB (7-9
// ms) 0.98-1.01× against 0.93-0.94× (3 each).
//
// What costs most is a class switching back and forth: each return to the
// caller's thread wakes sysmon from the sleep it took while the goroutine
// was parked. 8 MiB, whose calls take 3-5 ms here, is the class near the
// limit, and every rule that looked at one or two calls failed it in make
// bench (five pooled launches each): entering after one long call and
// leaving under half the limit stranded it on the worker for the rest of a
// launch (all 204 calls, 0.970× C, against 1.003× in a launch with none);
// two calls in a row at 5 ms both ways had MPICH's 8 MiB run 30 % of its
// calls on the worker (0.944×); two in a row at 5 and 4 ms had Open MPI's
// run 21 % there (0.965×). A majority of several calls moves a class only
// when its calls have changed, not on a straggler or a few slow calls, and
// a size's first calls (first touch of its buffers) do not count for more.
// With a limit of 5 ms even six of eight moved Open MPI's 8 MiB class now
// and then (26 and 50 of 130 calls in two of three launches), hence 6 ms
// (mpiLongCall).
type callTimes struct {
	last   [65][callWindow]time.Duration // the class's last timed calls, a ring
	next   [65]uint8                     // where the next one goes
	worker [65]bool
}

const (
	callWindow = 8
	callQuorum = 6
)

func sizeClass(bytes int) int { return bits.Len(uint(bytes)) }

// long reports whether the next call of bytes' class goes to the worker,
// given the limit, and remembers the answer.
func (c *callTimes) long(bytes int, limit time.Duration) bool {
	k := sizeClass(bytes)
	back := limit * 4 / 5
	longCalls, shortCalls := 0, 0
	for _, d := range c.last[k] {
		switch {
		case d >= limit:
			longCalls++
		case d < back:
			shortCalls++
		}
	}
	switch {
	case longCalls >= callQuorum:
		c.worker[k] = true
	case shortCalls >= callQuorum:
		c.worker[k] = false
	}
	return c.worker[k]
}

// timeEach reports whether every call of bytes' class is timed, given the
// limit: while its last timed call took a quarter of the limit or more
// (every call of a class on the worker, too). Other calls are timed only
// when they read the clock anyway (clockSkip), so a class whose calls turn
// long (a straggler) is seen within a few calls.
func (c *callTimes) timeEach(bytes int, limit time.Duration) bool {
	k := sizeClass(bytes)
	return c.last[k][(c.next[k]+callWindow-1)%callWindow] >= limit/4
}

// observe records that a call of bytes took d.
func (c *callTimes) observe(bytes int, d time.Duration) {
	k := sizeClass(bytes)
	c.last[k][c.next[k]] = d
	c.next[k] = (c.next[k] + 1) % callWindow
}

// mpiYieldBudget: how long the MPI backend lets a goroutine go without
// yielding (see yieldDue and the notes in mpi.go).
const mpiYieldBudget = 9 * time.Millisecond

// yieldDue is the MPI backend's rule for yielding to the Go scheduler: yield
// when one more call like the last one (took; 0 for calls too short to be
// timed) could end more than mpiYieldBudget after the last yield. sysmon
// preempts a goroutine it sees on the same scheduling tick twice, 10 ms
// apart; a tick that always ends within 9 ms never is. Yielding no sooner
// than that keeps the yields, which cost something too, few: ~110 a second.
func yieldDue(sinceYield, took time.Duration) bool {
	return sinceYield+took >= mpiYieldBudget
}

// mpiClockSpan: how much time of quick calls may go by between two clock
// reads, and mpiClockSkipMax the most calls between them (see clockSkip).
const (
	mpiClockSpan    = 100 * time.Microsecond
	mpiClockSkipMax = 15
)

// clockSkip spaces the clock reads of quick calls. A read costs ~30 ns here,
// a sixth of what the Go layer adds to an 8-byte allreduce, and the yield
// rule needs the time only to a small fraction of its 9 ms. So after each
// read, as many calls go unread as took mpiClockSpan on average since the
// last one, at most mpiClockSkipMax: a read per 16 calls costs 2 ns each.
// The cap bounds the lateness when calls suddenly slow down (a straggling
// peer): 15 calls of 1 ms push one yield late, which costs sysmon one
// preemption, not correctness. After a pause (the caller computing) the
// next read sees slow calls, and every call reads until they are quick.
type clockSkip struct {
	left  int           // calls still to go unread
	calls int           // calls since the last read
	last  time.Duration // the last read
}

// due counts a call and reports whether it reads the clock.
func (s *clockSkip) due() bool {
	s.calls++
	if s.left > 0 {
		s.left--
		return false
	}
	return true
}

// read records that the call just counted read the clock at now.
func (s *clockSkip) read(now time.Duration) {
	per := (now - s.last) / time.Duration(max(s.calls, 1))
	s.left = mpiClockSkipMax
	if per > 0 {
		s.left = int(min(mpiClockSpan/per, mpiClockSkipMax))
	}
	s.last, s.calls = now, 0
}
