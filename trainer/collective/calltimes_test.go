package collective

import (
	"testing"
	"time"
)

func TestCallTimes(t *testing.T) {
	const limit = 5 * time.Millisecond
	var c callTimes
	steps := []struct {
		name     string
		observe  int // bytes of a call that took d (0: none)
		d        time.Duration
		bytes    int
		wantLong bool
	}{
		{name: "nothing seen yet", bytes: 64 << 20, wantLong: false},
		{name: "a long call", observe: 64 << 20, d: 40 * time.Millisecond, bytes: 64 << 20, wantLong: true},
		{name: "same class, smaller", bytes: 64<<20 + 1<<20, wantLong: true},
		{name: "next class down", bytes: 32 << 20, wantLong: false},
		{name: "next class up", bytes: 128 << 20, wantLong: false},
		{name: "exactly the limit is long", observe: 16 << 20, d: limit, bytes: 16 << 20, wantLong: true},
		{name: "a short call of the class measures again", observe: 64 << 20, d: 3 * time.Millisecond, bytes: 64 << 20, wantLong: false},
		{name: "a straggler at 8 bytes", observe: 8, d: 20 * time.Millisecond, bytes: 8, wantLong: true},
		{name: "then a normal one", observe: 8, d: time.Microsecond, bytes: 8, wantLong: false},
		{name: "zero bytes is its own class", bytes: 0, wantLong: false},
		{name: "the largest int", observe: int(^uint(0) >> 1), d: time.Second, bytes: int(^uint(0) >> 1), wantLong: true},
	}
	for _, s := range steps {
		if s.observe != 0 {
			c.observe(s.observe, s.d)
		}
		if got := c.long(s.bytes, limit); got != s.wantLong {
			t.Errorf("%s: long(%d) = %v, want %v", s.name, s.bytes, got, s.wantLong)
		}
	}
	var zero callTimes
	if !zero.long(1<<20, 0) {
		t.Error("with a limit of 0 every call is long (the tests' way to force the worker)")
	}
}
