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
		observe  int // bytes of calls that took d (0: none)
		d        time.Duration
		n        int // how many such calls (0: one)
		bytes    int
		wantLong bool
		wantEach bool // every call of the class timed
	}{
		{name: "nothing seen yet", bytes: 64 << 20, wantLong: false, wantEach: false},
		{name: "one long call: not yet", observe: 64 << 20, d: 40 * ms, bytes: 64 << 20, wantLong: false, wantEach: true},
		{name: "five: not yet", observe: 64 << 20, d: 40 * ms, n: 4, bytes: 64 << 20, wantLong: false, wantEach: true},
		{name: "six of eight: the worker", observe: 64 << 20, d: 40 * ms, bytes: 64 << 20, wantLong: true, wantEach: true},
		{name: "same class, smaller", bytes: 64<<20 + 1<<20, wantLong: true, wantEach: true},
		{name: "next class down", bytes: 32 << 20, wantLong: false, wantEach: false},
		{name: "next class up", bytes: 128 << 20, wantLong: false, wantEach: false},
		{name: "on the worker, calls just under the limit stay", observe: 64 << 20, d: limit - 1, n: 8, bytes: 64 << 20, wantLong: true, wantEach: true},
		{name: "five under four fifths: still there", observe: 64 << 20, d: limit*4/5 - 1, n: 5, bytes: 64 << 20, wantLong: true, wantEach: true},
		{name: "six bring it back", observe: 64 << 20, d: limit*4/5 - 1, bytes: 64 << 20, wantLong: false, wantEach: true},
		{name: "back on the caller's thread, two long calls do not return it", observe: 64 << 20, d: limit, n: 2, bytes: 64 << 20, wantLong: false, wantEach: true},
		{name: "under a quarter: no longer timed each time", observe: 64 << 20, d: limit/4 - 1, bytes: 64 << 20, wantLong: false, wantEach: false},
		{name: "a first call's page faults", observe: 4 << 20, d: 12 * ms, bytes: 4 << 20, wantLong: false, wantEach: true},
		{name: "stragglers among 2.5 ms calls", observe: 4 << 20, d: 2500 * time.Microsecond, n: 3, bytes: 4 << 20, wantLong: false, wantEach: true},
		{name: "(two in a row)", observe: 4 << 20, d: 20 * ms, n: 2, bytes: 4 << 20, wantLong: false, wantEach: true},
		{name: "(and the usual call after them)", observe: 4 << 20, d: 2500 * time.Microsecond, bytes: 4 << 20, wantLong: false, wantEach: true},
		{name: "3.8 ms calls with a slow phase", observe: 8 << 20, d: 3800 * time.Microsecond, n: 8, bytes: 8 << 20, wantLong: false, wantEach: true},
		{name: "(five slow calls of eight)", observe: 8 << 20, d: 6 * ms, n: 5, bytes: 8 << 20, wantLong: false, wantEach: true},
		{name: "(the usual again)", observe: 8 << 20, d: 3800 * time.Microsecond, n: 8, bytes: 8 << 20, wantLong: false, wantEach: true},
		{name: "calls of 4-5 ms move nothing", observe: 8 << 20, d: 4500 * time.Microsecond, n: 8, bytes: 8 << 20, wantLong: false, wantEach: true},
		{name: "exactly the limit is long", observe: 16 << 20, d: limit, n: 6, bytes: 16 << 20, wantLong: true, wantEach: true},
		{name: "and 4-5 ms calls keep it there", observe: 16 << 20, d: 4500 * time.Microsecond, n: 8, bytes: 16 << 20, wantLong: true, wantEach: true},
		{name: "a straggler at 8 bytes", observe: 8, d: 20 * ms, bytes: 8, wantLong: false, wantEach: true},
		{name: "then a normal one", observe: 8, d: time.Microsecond, bytes: 8, wantLong: false, wantEach: false},
		{name: "zero bytes is its own class", bytes: 0, wantLong: false, wantEach: false},
		{name: "the largest int", observe: int(^uint(0) >> 1), d: time.Second, n: 5, bytes: int(^uint(0) >> 1), wantLong: false, wantEach: true},
		{name: "the largest int, six times", observe: int(^uint(0) >> 1), d: time.Second, bytes: int(^uint(0) >> 1), wantLong: true, wantEach: true},
	}
	for _, s := range steps {
		for range max(s.n, 1) {
			if s.observe != 0 {
				c.observe(s.observe, s.d)
			}
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
