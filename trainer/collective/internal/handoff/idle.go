package handoff

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// IdlePoll is how a collective made beside compute waits for its peers
// (idle.h): a test, then a sleep of Min, doubling up to Max, between
// tests. Progress in MPI and oneCCL happens only in a test, so a longer
// sleep frees more of the core for the compute and makes the call end
// later: up to one sleep after its data arrived.
type IdlePoll struct{ Min, Max time.Duration }

// IdlePollDefault: 2 µs (about one shared-memory round trip) doubling to
// 64 µs, measured against 16 µs .. 256 µs in docs/performance.md
// ("Gradient buckets").
var IdlePollDefault = IdlePoll{Min: 2 * time.Microsecond, Max: 64 * time.Microsecond}

// ParseIdlePoll reads BATCHKIT_IDLE_POLL's value: "" is IdlePollDefault,
// else "MIN,MAX" in microseconds (MIN ≥ 1, MAX ≥ MIN).
func ParseIdlePoll(v string) (IdlePoll, error) {
	if v == "" {
		return IdlePollDefault, nil
	}
	lo, hi, ok := strings.Cut(v, ",")
	a, err1 := strconv.Atoi(strings.TrimSpace(lo))
	b, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if !ok || err1 != nil || err2 != nil || a < 1 || b < a || b > 1_000_000 {
		return IdlePoll{}, fmt.Errorf("BATCHKIT_IDLE_POLL=%q: want MIN,MAX in microseconds (1 <= MIN <= MAX <= 1000000), the sleeps between a background collective's tests", v)
	}
	return IdlePoll{Min: time.Duration(a) * time.Microsecond, Max: time.Duration(b) * time.Microsecond}, nil
}
