// Package conform is the collective conformance suite every backend must
// pass (suite.go: Run for in-process worlds, World for this rank of a
// launcher's world, Check for one rank's part) and its expected values
// (this file: Input, Want, Compare ...), which the backends' own tests
// use too. A new backend's tests call Run or World with one line; the
// suite drives the backend through collective.Comm, as programs do.
package conform

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"unsafe"

	"github.com/batchkit/batchkit/trainer/collective/backend"
)

// Input is rank r's element i: small integers with both signs, so sums of a
// few ranks are exact in float32 and float64 and every op has one right answer.
func Input(r, i int) float64 { return float64((i*31+r*17)%23 - 11) }

// FillInput sets s to rank r's input.
func FillInput[T backend.Float](s []T, r int) {
	for i := range s {
		s[i] = T(Input(r, i))
	}
}

// Want is the expected reduction over n ranks of element i, in T's arithmetic.
func Want[T backend.Float](op backend.Op, n, i int) T {
	acc := T(Input(0, i))
	for r := 1; r < n; r++ {
		v := T(Input(r, i))
		switch op {
		case backend.Sum, backend.Avg:
			acc += v
		case backend.Max:
			acc = max(acc, v)
		case backend.Min:
			acc = min(acc, v)
		}
	}
	if op == backend.Avg {
		acc /= T(n)
	}
	return acc
}

// Compare checks got bit for bit against wantAt.
func Compare[T backend.Float](what string, got []T, wantAt func(i int) T) error {
	for i, g := range got {
		if w := wantAt(i); !SameBits(g, w) {
			return fmt.Errorf("%s: element %d of %d = %v, want %v", what, i, len(got), g, w)
		}
	}
	return nil
}

// SameBits reports whether a and b are the same bits.
func SameBits[T backend.Float](a, b T) bool {
	if unsafe.Sizeof(a) == 4 {
		return math.Float32bits(float32(a)) == math.Float32bits(float32(b))
	}
	return math.Float64bits(float64(a)) == math.Float64bits(float64(b))
}

// HashParts is the FNV-64 hash of s's bytes split into four exactly
// representable 16-bit parts: what each rank gathers to check that every
// rank holds bit-identical s (SameEverywhere).
func HashParts[T backend.Float](s []T) []float64 {
	h := fnv.New64a()
	h.Write(backend.BufferOf(s).Bytes())
	sum := h.Sum64()
	return []float64{float64(sum >> 48), float64(sum >> 32 & 0xffff), float64(sum >> 16 & 0xffff), float64(sum & 0xffff)}
}

// SameEverywhere checks the gathered HashParts of every rank (4 per rank,
// in rank order) against rank 0's.
func SameEverywhere(all []float64) error {
	for r := 0; r < len(all)/4; r++ {
		if !slices.Equal(all[4*r:4*r+4], all[:4]) {
			return fmt.Errorf("results differ between rank 0 and rank %d (hash parts %v vs %v)", r, all[:4], all[4*r:4*r+4])
		}
	}
	return nil
}
