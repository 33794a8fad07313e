package collective

import (
	"math/bits"
	"time"
)

// callTimes remembers how long the last call of each size class took (a
// class is the bytes rounded down to a power of two) and which classes the
// MPI backend runs on its worker thread. A class goes there when its last
// call took at least the limit, and comes back when one takes under a
// quarter of it. The gap keeps a class whose calls take about the limit
// from switching back and forth, which costs more than either side: each
// return to the caller's thread wakes sysmon from the sleep it took while
// the goroutine was parked. Measured in one process, 8 MiB allreduces of
// 3-5 ms with a quarter of them handed over ran at 0.88-0.94× C, all of
// them at 0.97-0.99×. A straggler's wait can send a class of quick calls to
// the worker; its next call, quick again, brings it back.
type callTimes struct {
	took   [65]time.Duration
	worker [65]bool
}

func sizeClass(bytes int) int { return bits.Len(uint(bytes)) }

// long reports whether the next call of bytes' class goes to the worker,
// given the limit, and remembers the answer.
func (c *callTimes) long(bytes int, limit time.Duration) bool {
	k := sizeClass(bytes)
	c.worker[k] = c.took[k] >= limit || c.worker[k] && c.took[k] >= limit/4
	return c.worker[k]
}

// observe records that a call of bytes took d.
func (c *callTimes) observe(bytes int, d time.Duration) { c.took[sizeClass(bytes)] = d }

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
