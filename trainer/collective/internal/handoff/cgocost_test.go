package handoff

import "testing"

// BenchmarkCgoCall: ns per cgo call (see cgocost.go); BenchmarkGoCall is
// the same loop without cgo, the floor.
func BenchmarkCgoCall(b *testing.B) {
	sum := 0
	for i := 0; b.Loop(); i++ {
		sum += nop12(i)
	}
	sink = sum
}

func BenchmarkGoCall(b *testing.B) {
	sum := 0
	for i := 0; b.Loop(); i++ {
		sum += goNop12(i)
	}
	sink = sum
}

var sink int

//go:noinline
func goNop12(i int) int { return i + 1 }

func TestNop12(t *testing.T) {
	if got := nop12(5); got != 5+1+1+1 { // a + (s == r) + (abort == 0) + (m == 0)
		t.Fatalf("nop12(5) = %d, want 8", got)
	}
}
