package mpi

import "time"

// yieldEvery: a goroutine that only calls MPI never passes through Go's
// scheduler, and after 10 ms sysmon starts taking its P away, waking threads
// on the core the rank busy-polls on. A runtime.Gosched before then keeps
// sysmon asleep; without it, calls of 64 KiB to 1 MiB ran 1.1-1.4x slower
// (make bench-ab, docs/mpi-backend.md).
const yieldEvery = 8 * time.Millisecond

// yieldDue reports whether a call ending at now, the last yield at last,
// should be followed by one.
func yieldDue(now, last time.Time) bool { return now.Sub(last) >= yieldEvery }
