package collective

import (
	"math"
	"math/rand/v2"
	"testing"
)

// divide's shortcuts (none by 1, the reciprocal's product by a power of two)
// give the quotient's bits for every kind of float32 and float64: normal,
// subnormal (where the product rounds), the largest, ±0 and ±Inf; a NaN
// stays a NaN (by 1 a signalling one stays signalling, where the division
// would have set its quiet bit: arithmetic never makes one).
func TestDivideBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	f32 := []float32{0, float32(math.Copysign(0, -1)), 1, -3, math.MaxFloat32, -math.SmallestNonzeroFloat32,
		3 * math.SmallestNonzeroFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	f64 := []float64{0, math.Copysign(0, -1), 1, -3, math.MaxFloat64, -math.SmallestNonzeroFloat64,
		3 * math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1), math.NaN()}
	for range 100_000 {
		f32 = append(f32, math.Float32frombits(rng.Uint32()))
		f64 = append(f64, math.Float64frombits(rng.Uint64()))
	}
	for _, n := range []int{1, 2, 3, 4, 6, 8, 1024, 1 << 30} {
		got32, got64 := append([]float32(nil), f32...), append([]float64(nil), f64...)
		divide(got32, n)
		divide(got64, n)
		for i, x := range f32 {
			if want := x / float32(n); math.Float32bits(got32[i]) != math.Float32bits(want) && !(x != x && got32[i] != got32[i]) {
				t.Fatalf("float32 %g / %d: %g (%#x), want %g (%#x)", x, n, got32[i], math.Float32bits(got32[i]), want, math.Float32bits(want))
			}
		}
		for i, x := range f64 {
			if want := x / float64(n); math.Float64bits(got64[i]) != math.Float64bits(want) && !(x != x && got64[i] != got64[i]) {
				t.Fatalf("float64 %g / %d: %g, want %g", x, n, got64[i], want)
			}
		}
	}
}

// BenchmarkDivide is the mean's pass over the compute-bound model's gradient
// (1,126,416 float32: issue 33's 1024,1024 MLP, 1,126,410 parameters, and
// the six extras the step piggybacks on it) at 1 rank, 2 ranks (a power of
// two) and 3 (a true division).
func BenchmarkDivide(b *testing.B) {
	s := make([]float32, 1_126_416)
	for i := range s {
		s[i] = float32(i%1000) * 1e-3
	}
	for _, n := range []int{1, 2, 3} {
		b.Run(string(rune('0'+n)), func(b *testing.B) {
			for b.Loop() {
				divide(s, n)
			}
		})
	}
}
