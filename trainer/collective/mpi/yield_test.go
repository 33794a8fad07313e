package mpi

import (
	"testing"
	"time"
)

func TestYieldDue(t *testing.T) {
	start := time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		now, last time.Time
		wantYield bool
	}{
		{"first call: never yielded", start, time.Time{}, true},
		{"just yielded", start, start, false},
		{"under the interval", start.Add(yieldEvery - time.Microsecond), start, false},
		{"at the interval", start.Add(yieldEvery), start, true},
		{"well before sysmon's 10 ms", start.Add(9 * time.Millisecond), start, true},
	} {
		if got := yieldDue(tc.now, tc.last); got != tc.wantYield {
			t.Errorf("%s: yieldDue = %v, want %v", tc.name, got, tc.wantYield)
		}
	}
}
