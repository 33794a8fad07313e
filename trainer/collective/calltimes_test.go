package collective

import (
	"testing"
	"time"
)

func TestCallTimes(t *testing.T) {
	const limit = 5 * time.Millisecond
	ms := time.Millisecond
	var c callTimes
	steps := []struct {
		name     string
		observe  int // bytes of a call that took d (0: none)
		d        time.Duration
		bytes    int
		wantLong bool
		wantEach bool // every call of the class timed
	}{
		{name: "nothing seen yet", bytes: 64 << 20, wantLong: false, wantEach: false},
		{name: "one long call: not yet", observe: 64 << 20, d: 40 * ms, bytes: 64 << 20, wantLong: false, wantEach: true},
		{name: "two in a row: the worker", observe: 64 << 20, d: 40 * ms, bytes: 64 << 20, wantLong: true, wantEach: true},
		{name: "same class, smaller", bytes: 64<<20 + 1<<20, wantLong: true, wantEach: true},
		{name: "next class down", bytes: 32 << 20, wantLong: false, wantEach: false},
		{name: "next class up", bytes: 128 << 20, wantLong: false, wantEach: false},
		{name: "a first call's page faults", observe: 4 << 20, d: 12 * ms, bytes: 4 << 20, wantLong: false, wantEach: true},
		{name: "then its usual 2.5 ms: stays", observe: 4 << 20, d: 2500 * time.Microsecond, bytes: 4 << 20, wantLong: false, wantEach: true},
		{name: "a straggler between two usual calls", observe: 4 << 20, d: 20 * ms, bytes: 4 << 20, wantLong: false, wantEach: true},
		{name: "and the usual call after it", observe: 4 << 20, d: 2500 * time.Microsecond, bytes: 4 << 20, wantLong: false, wantEach: true},
		{name: "exactly the limit twice is long", observe: 16 << 20, d: limit, bytes: 16 << 20, wantLong: false, wantEach: true},
		{name: "(the second)", observe: 16 << 20, d: limit, bytes: 16 << 20, wantLong: true, wantEach: true},
		{name: "on the worker, calls just under the limit stay", observe: 64 << 20, d: limit - 1, bytes: 64 << 20, wantLong: true, wantEach: true},
		{name: "(the second)", observe: 64 << 20, d: limit - 1, bytes: 64 << 20, wantLong: true, wantEach: true},
		{name: "one under four fifths: still there", observe: 64 << 20, d: limit*4/5 - 1, bytes: 64 << 20, wantLong: true, wantEach: true},
		{name: "two in a row bring it back", observe: 64 << 20, d: limit*4/5 - 1, bytes: 64 << 20, wantLong: false, wantEach: true},
		{name: "back on the caller's thread, a long call alone does not return it", observe: 64 << 20, d: limit, bytes: 64 << 20, wantLong: false, wantEach: true},
		{name: "under a quarter: no longer timed each time", observe: 64 << 20, d: limit/4 - 1, bytes: 64 << 20, wantLong: false, wantEach: false},
		{name: "3.5 ms calls, then two slow ones", observe: 8 << 20, d: 6 * ms, bytes: 8 << 20, wantLong: false, wantEach: true},
		{name: "(the second) send them to the worker", observe: 8 << 20, d: 6 * ms, bytes: 8 << 20, wantLong: true, wantEach: true},
		{name: "one usual call: still there", observe: 8 << 20, d: 3500 * time.Microsecond, bytes: 8 << 20, wantLong: true, wantEach: true},
		{name: "two: back on the caller's thread", observe: 8 << 20, d: 3500 * time.Microsecond, bytes: 8 << 20, wantLong: false, wantEach: true},
		{name: "a straggler at 8 bytes", observe: 8, d: 20 * ms, bytes: 8, wantLong: false, wantEach: true},
		{name: "then a normal one", observe: 8, d: time.Microsecond, bytes: 8, wantLong: false, wantEach: false},
		{name: "zero bytes is its own class", bytes: 0, wantLong: false, wantEach: false},
		{name: "the largest int", observe: int(^uint(0) >> 1), d: time.Second, bytes: int(^uint(0) >> 1), wantLong: false, wantEach: true},
		{name: "the largest int, twice", observe: int(^uint(0) >> 1), d: time.Second, bytes: int(^uint(0) >> 1), wantLong: true, wantEach: true},
	}
	for _, s := range steps {
		if s.observe != 0 {
			c.observe(s.observe, s.d)
		}
		if got := c.timeEach(s.bytes, limit); got != s.wantEach {
			t.Errorf("%s: timeEach(%d) = %v, want %v", s.name, s.bytes, got, s.wantEach)
		}
		if got := c.long(s.bytes, limit); got != s.wantLong {
			t.Errorf("%s: long(%d) = %v, want %v", s.name, s.bytes, got, s.wantLong)
		}
	}
	var zero callTimes
	if !zero.long(1<<20, 0) {
		t.Error("with a limit of 0 every call is long (the tests' way to force the worker)")
	}
	if !zero.timeEach(1<<20, 0) {
		t.Error("with a limit of 0 every call is timed, so that every one can go to the worker")
	}
}

func TestYieldDue(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name             string
		sinceYield, took time.Duration
		want             bool
	}{
		{"just yielded", 0, 0, false},
		{"small calls wait for the whole budget", mpiYieldBudget - 1, 0, false},
		{"small calls at the budget", mpiYieldBudget, 0, true},
		{"a 2.5 ms call could overrun: yield early", 7 * ms, 2500 * time.Microsecond, true},
		{"a 2.5 ms call that fits", 6 * ms, 2500 * time.Microsecond, false},
		{"a call as long as the budget yields every time", 0, mpiYieldBudget, true},
	} {
		if got := yieldDue(c.sinceYield, c.took); got != c.want {
			t.Errorf("%s: yieldDue(%v, %v) = %v, want %v", c.name, c.sinceYield, c.took, got, c.want)
		}
	}
	// The rule keeps every scheduling tick under sysmon's 10 ms: after a
	// call that did not yield, one more of the same still ends in budget.
	for took := time.Duration(0); took < 5*ms; took += 100 * time.Microsecond {
		for since := time.Duration(0); since < 20*ms; since += 50 * time.Microsecond {
			if !yieldDue(since, took) && since+took >= 10*ms {
				t.Fatalf("no yield %v after the last with %v calls: the next ends past 10 ms", since, took)
			}
		}
	}
}

func TestClockSkip(t *testing.T) {
	us := time.Microsecond
	var s clockSkip
	now := time.Duration(0)
	// run makes calls of per each, reading the clock when due, and returns
	// how many calls went unread between the reads it made.
	run := func(calls int, per time.Duration) (gaps []int) {
		gap := 0
		for range calls {
			now += per
			if !s.due() {
				gap++
				continue
			}
			s.read(now)
			gaps = append(gaps, gap)
			gap = 0
		}
		return gaps
	}
	for _, c := range []struct {
		name     string
		calls    int
		per      time.Duration
		wantLast int // calls unread before the last read
	}{
		{"the first call reads", 1, time.Second, 0},
		{"after a pause, calls over 100 µs read every time", 5, 150 * us, 0},
		{"50 µs calls: 2 between reads", 20, 50 * us, 2},
		{"10 µs calls: 10 between reads", 100, 10 * us, 10},
		{"1 µs calls: the cap", 1000, us, mpiClockSkipMax},
		{"a sudden 1 ms: every call reads once the cap's calls are by", 20, time.Millisecond, 0},
		{"fast again", 1000, time.Nanosecond, mpiClockSkipMax},
	} {
		gaps := run(c.calls, c.per)
		if len(gaps) == 0 || gaps[len(gaps)-1] != c.wantLast {
			t.Errorf("%s: calls unread between reads %v, want the last %d", c.name, tail(gaps, 5), c.wantLast)
		}
		for _, g := range gaps {
			if g > mpiClockSkipMax {
				t.Errorf("%s: %d calls between reads, more than %d", c.name, g, mpiClockSkipMax)
			}
		}
	}
}

func tail(v []int, n int) []int { return v[max(0, len(v)-n):] }
