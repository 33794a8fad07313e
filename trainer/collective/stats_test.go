package collective

import (
	"math"
	"slices"
	"testing"
)

// Statistics for the opt-in measurements (mpi_bench_test.go). They live in
// an untagged file so that their own tests run in every build.

// medianCI returns the median of v and a distribution-free 95 % confidence
// interval for it: the order statistics x(l) and x(n+1-l) (1-based) for the
// largest l whose two-sided binomial tail, 2·P(Bin(n, ½) ≤ l-1), is at most
// 5 %. Such an interval assumes nothing about the shape of the noise, which
// on a shared VM is anything but normal. Below 6 values no l qualifies and
// the interval is the whole range (coverage under 95 %). v is not modified;
// it must not be empty.
func medianCI(v []float64) (lo, med, hi float64) {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		med = s[n/2]
	} else {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	l := 1
	for k := 1; k < n/2; k++ {
		// k values at most: P(Bin(n, ½) ≤ k) = Σ C(n, i) / 2^n, i ≤ k.
		if 2*binomTail(n, k) > 0.05 {
			break
		}
		l = k + 1
	}
	return s[l-1], med, s[n-l]
}

// binomTail is P(Bin(n, ½) ≤ k), summed in log space (2^-n underflows from
// n = 1075).
func binomTail(n, k int) float64 {
	lnN, _ := math.Lgamma(float64(n + 1))
	p := 0.0
	for i := 0; i <= k; i++ {
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		p += math.Exp(lnN - a - b - float64(n)*math.Ln2)
	}
	return p
}

func TestMedianCI(t *testing.T) {
	// 1..n in reverse, so that the order statistic x(i) is i and the
	// function has to sort.
	seq := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(n - i)
		}
		return v
	}
	for _, tc := range []struct {
		name        string
		v           []float64
		lo, med, hi float64
	}{
		{"one value", []float64{0.97}, 0.97, 0.97, 0.97},
		// Under 6 values no interval reaches 95 %: the whole range.
		{"five values", seq(5), 1, 3, 5},
		// The textbook intervals (x(l), x(n+1-l)): n 6 → (1, 6), 11 → (2,
		// 10), 20 → (6, 15), 100 → (40, 61).
		{"six values", seq(6), 1, 3.5, 6},
		{"eleven values", seq(11), 2, 6, 10},
		{"twenty values", seq(20), 6, 10.5, 15},
		{"a hundred values", seq(100), 40, 50.5, 61},
		{"ties", []float64{1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1}, 1, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.v)
			lo, med, hi := medianCI(tc.v)
			if got, want := [3]float64{lo, med, hi}, [3]float64{tc.lo, tc.med, tc.hi}; got != want {
				t.Errorf("medianCI = %v, want %v", got, want)
			}
			if !slices.Equal(in, tc.v) {
				t.Errorf("medianCI reordered its input: %v", tc.v)
			}
		})
	}
}

func TestBinomTail(t *testing.T) {
	for _, tc := range []struct {
		n, k int
		want float64
	}{
		{1, 0, 0.5},
		{11, 1, 12.0 / 2048},
		{20, 5, 21700.0 / 1048576},
		{2000, 2000, 1}, // 2^-2000 underflows unless summed in log space
		{2000, 999, 0.5 - 0.5*0.017839},
	} {
		if got := binomTail(tc.n, tc.k); math.Abs(got-tc.want) > 1e-5 {
			t.Errorf("binomTail(%d, %d) = %.7f, want %.7f", tc.n, tc.k, got, tc.want)
		}
	}
}
