package collective

import (
	"math/bits"
	"time"
)

// callTimes remembers how long the last call of each size class took (a
// class is the bytes rounded down to a power of two). The MPI backend runs a
// call on its worker thread when the last call of the same class took at
// least the limit: a straggler's wait makes one call look long, and the next
// one of its class measures again.
type callTimes [65]time.Duration

func sizeClass(bytes int) int { return bits.Len(uint(bytes)) }

// long reports whether the last call of bytes' class took at least limit.
func (c *callTimes) long(bytes int, limit time.Duration) bool {
	return c[sizeClass(bytes)] >= limit
}

// observe records that a call of bytes took d.
func (c *callTimes) observe(bytes int, d time.Duration) { c[sizeClass(bytes)] = d }

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
