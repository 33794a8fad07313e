package trainer

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// naiveLinear is the forward kernel z = a · wᵀ written out (a: n×k, w: m×k,
// z: n×m), each element a 4-way unrolled dot product: the candidate own
// kernel that BenchmarkLinear weighs against gonum's Sgemm.
func naiveLinear(a, w, z []float32, n, k, m int) {
	for i := range n {
		ai := a[i*k : (i+1)*k]
		for j := range m {
			wj := w[j*k : (j+1)*k]
			var s0, s1, s2, s3 float32
			l := 0
			for ; l+4 <= k; l += 4 {
				s0 += ai[l] * wj[l]
				s1 += ai[l+1] * wj[l+1]
				s2 += ai[l+2] * wj[l+2]
				s3 += ai[l+3] * wj[l+3]
			}
			for ; l < k; l++ {
				s0 += ai[l] * wj[l]
			}
			z[i*m+j] = (s0 + s1) + (s2 + s3)
		}
	}
}

func linearOperands(n, k, m int) (a, w, z []float32) {
	a, w, z = make([]float32, n*k), make([]float32, m*k), make([]float32, n*m)
	for i := range a {
		a[i] = float32(math.Sin(float64(i)))
	}
	for i := range w {
		w[i] = float32(math.Cos(float64(i)))
	}
	return a, w, z
}

func TestNaiveLinearMatchesGemm(t *testing.T) {
	const n, k, m = 5, 13, 7
	a, w, z := linearOperands(n, k, m)
	want := make([]float32, n*m)
	naiveLinear(a, w, z, n, k, m)
	blas32.Gemm(blas.NoTrans, blas.Trans, 1, general(a, n, k), general(w, m, k), 0, general(want, n, m))
	for i := range z {
		if math.Abs(float64(z[i]-want[i])) > 1e-4 {
			t.Fatalf("element %d: %g, gemm %g", i, z[i], want[i])
		}
	}
}

// BenchmarkLinear: a batch of 64 through a 1024×1024 layer, forward.
// gonum's Sgemm (blocked, parallel) against the naive kernel above.
func BenchmarkLinear(b *testing.B) {
	const n, k, m = 64, 1024, 1024
	a, w, z := linearOperands(n, k, m)
	flops := func(b *testing.B) {
		b.ReportMetric(2*n*k*m*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
	b.Run("gonum", func(b *testing.B) {
		for b.Loop() {
			blas32.Gemm(blas.NoTrans, blas.Trans, 1, general(a, n, k), general(w, m, k), 0, general(z, n, m))
		}
		flops(b)
	})
	b.Run("naive", func(b *testing.B) {
		for b.Loop() {
			naiveLinear(a, w, z, n, k, m)
		}
		flops(b)
	})
}
