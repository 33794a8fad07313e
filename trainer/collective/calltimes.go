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
