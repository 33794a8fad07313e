// Package yield decides when a goroutine that makes nothing but short cgo
// calls (the mpi and ccl backends' direct path) should call
// runtime.Gosched.
//
// Such a goroutine never passes through Go's scheduler, and after 10 ms
// sysmon starts taking its P away, waking threads on the core the rank
// busy-polls on. A runtime.Gosched before then keeps sysmon asleep: without
// it, MPI calls of 64 KiB to 1 MiB ran 1.1-1.6× slower (docs/mpi-backend.md).
package yield

import "time"

// Every is the longest a goroutine goes without a yield.
const Every = 8 * time.Millisecond

// The rule reads the clock, and a read costs what a small call can barely
// afford: 47 ns on this project's VM, up to 0.2-0.4 µs on one whose vDSO
// has no usable clock, against a 5 µs oneCCL or Intel MPI allreduce (the C
// references read none a call). So the clock is read once clockCalls calls
// or clockBytes bytes have gone by since the last read: about a
// millisecond here (64 calls of up to ~20 µs, or 4 MiB at a few GB/s),
// well inside Every.
const (
	clockCalls = 64
	clockBytes = 4 << 20
)

// Yielder is one goroutine's (one backend's, under its lock) rule. The
// zero value is ready and reads time.Now.
type Yielder struct {
	Now   func() time.Time // the clock; nil is time.Now
	last  time.Time        // the last yield
	calls int              // since the clock was last read
	bytes int              // moved since then
}

// After reports whether the goroutine should yield after a call that moved
// bytes.
func (y *Yielder) After(bytes int) bool {
	y.calls++
	if y.bytes += bytes; y.calls < clockCalls && y.bytes < clockBytes {
		return false
	}
	y.calls, y.bytes = 0, 0
	now := y.now()
	if now.Sub(y.last) < Every {
		return false
	}
	y.last = now
	return true
}

func (y *Yielder) now() time.Time {
	if y.Now == nil {
		return time.Now()
	}
	return y.Now()
}
