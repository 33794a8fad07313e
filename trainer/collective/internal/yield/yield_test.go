package yield

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The clock is read once 64 calls or 4 MiB have gone by, and a yield is
// due when 8 ms have passed since the last one.
func TestYielder(t *testing.T) {
	var clock time.Time
	reads := 0
	y := Yielder{Now: func() time.Time { reads++; return clock }}
	clock = clock.Add(time.Hour)
	var got []string
	step := func(what string, calls, bytes int, each time.Duration) {
		yields := 0
		reads = 0
		for range calls {
			clock = clock.Add(each)
			if y.After(bytes) {
				yields++
			}
		}
		got = append(got, fmt.Sprintf("%s: %d reads, %d yields", what, reads, yields))
	}
	step("640 calls of 8 B, 5 µs each", 640, 8, 5*time.Microsecond)             // 3.2 ms
	step("1600 calls of 64 KiB, 20 µs each", 1600, 64<<10, 20*time.Microsecond) // 32 ms
	step("160 calls of 1 MiB, 150 µs each", 160, 1<<20, 150*time.Microsecond)   // 24 ms
	step("10 calls of 8 MiB, 5 ms each", 10, 8<<20, 5*time.Millisecond)
	want := []string{
		"640 calls of 8 B, 5 µs each: 10 reads, 1 yields", // the first read finds no yield yet
		"1600 calls of 64 KiB, 20 µs each: 25 reads, 4 yields",
		"160 calls of 1 MiB, 150 µs each: 40 reads, 2 yields",
		"10 calls of 8 MiB, 5 ms each: 10 reads, 5 yields",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("clock reads and yields (-want +got):\n%s", diff)
	}
}

// The zero value reads the real clock: a first call after 64 calls' worth
// yields (the zero last yield is long past).
func TestYielderZeroValue(t *testing.T) {
	var y Yielder
	yields := 0
	for range clockCalls {
		if y.After(8) {
			yields++
		}
	}
	if yields != 1 {
		t.Errorf("%d yields in the first %d calls, want 1", yields, clockCalls)
	}
}
