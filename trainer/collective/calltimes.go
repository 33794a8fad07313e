package collective

import (
	"math/bits"
	"time"
)

// callTimes remembers how long the last two timed calls of each size class
// took (a class is the bytes rounded down to a power of two) and which
// classes the MPI backend runs on its worker thread. A class goes there
// when two calls in a row took at least the limit, and comes back when two
// in a row took under four fifths of it. One long call is not enough: the
// first call of a size (first touch of its buffers) or a straggler's wait
// would otherwise park a class of 1-5 ms calls on the worker, where it is
// slower than on the caller's thread. Measured in one process
// (TestMPIOverhead, Open MPI, 2 ranks, one size per launch, launches taking
// turns, 2026-12-02), every call handed over against the caller's thread:
// 4 MiB (1-2.8 ms calls) 0.94× C against 1.01× (medians of 6 launches
// each), 8 MiB (3.4-4.6 ms) 0.975× against 0.998× (5 each), but 16 MiB (7-9
// ms) 0.98-1.01× against 0.93-0.94× (3 each).
//
// The two limits and the two calls each way keep a class whose calls take
// about the limit from switching back and forth, which costs more than
// either side: each return to the caller's thread wakes sysmon from the
// sleep it took while the goroutine was parked. With one limit for both
// ways, MPICH's 8 MiB allreduces (4.6-4.9 ms) ran 30 % of their calls on
// the worker and measured 0.944× C over five launches (make bench), where
// they had measured 0.98-0.99× in four runs with the limits apart. Those
// had been apart too far, though: a class came back only after a call
// under half the limit, which Open MPI's 8 MiB calls (3-4.6 ms) never make,
// so two slow calls in a row kept them on the worker for the rest of a
// launch (every one of 204 calls, 0.970× C, against 1.003× in the next
// launch with none).
type callTimes struct {
	took   [65]time.Duration
	prev   [65]time.Duration // the timed call before took's
	worker [65]bool
}

func sizeClass(bytes int) int { return bits.Len(uint(bytes)) }

// long reports whether the next call of bytes' class goes to the worker,
// given the limit, and remembers the answer.
func (c *callTimes) long(bytes int, limit time.Duration) bool {
	k := sizeClass(bytes)
	back := limit * 4 / 5
	switch took, prev := c.took[k], c.prev[k]; {
	case took >= limit && prev >= limit:
		c.worker[k] = true
	case took < back && prev < back:
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
	return c.took[sizeClass(bytes)] >= limit/4
}

// observe records that a call of bytes took d.
func (c *callTimes) observe(bytes int, d time.Duration) {
	k := sizeClass(bytes)
	c.prev[k], c.took[k] = c.took[k], d
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
