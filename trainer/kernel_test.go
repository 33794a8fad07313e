package trainer

import (
	"math"
	"syscall"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/batchkit/batchkit/trainer/gemm"
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
	gemm.Default().Sgemm(blas.NoTrans, blas.Trans, n, m, k, 1, a, k, w, k, 0, want, m)
	for i := range z {
		if math.Abs(float64(z[i]-want[i])) > 1e-4 {
			t.Fatalf("element %d: %g, gemm %g", i, z[i], want[i])
		}
	}
}

// BenchmarkLinear: a batch of 64 through a 1024×1024 layer, forward.
// Every GEMM library built in (gonum's Sgemm is blocked, parallel) against
// the naive kernel above.
func BenchmarkLinear(b *testing.B) {
	const n, k, m = 64, 1024, 1024
	a, w, z := linearOperands(n, k, m)
	flops := func(b *testing.B) {
		b.ReportMetric(2*n*k*m*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
	for _, lib := range gemm.Built() {
		g := openGemm(b, lib.Name)
		b.Run(lib.Name, func(b *testing.B) {
			for b.Loop() {
				g.Sgemm(blas.NoTrans, blas.Trans, n, m, k, 1, a, k, w, k, 0, z, m)
			}
			flops(b)
		})
	}
	b.Run("naive", func(b *testing.B) {
		for b.Loop() {
			naiveLinear(a, w, z, n, k, m)
		}
		flops(b)
	})
}

// BenchmarkStep is the compute-bound configuration of issue 33 (one rank,
// the digits' 64 features, hidden 1024,1024, 10 classes, batch 64): one
// training step's compute, LossGrad and the SGD update, with every GEMM
// library built in at the rank's thread count (run it with GOMAXPROCS=1
// OMP_NUM_THREADS=1 for one thread). GFLOP/s counts the GEMMs alone (2·n·in·out
// a GEMM: forward, weight gradient, and the input gradient of every layer
// but the first), as the figure to hold against a large SGEMM's.
func BenchmarkStep(b *testing.B) {
	const batch = 64
	m, err := NewMLP(64, []int{1024, 1024}, 10)
	if err != nil {
		b.Fatal(err)
	}
	flops := 0.0
	for i := 1; i < len(m.Sizes); i++ {
		gemms := 3.0
		if i == 1 {
			gemms = 2
		}
		flops += gemms * 2 * batch * float64(m.Sizes[i-1]*m.Sizes[i])
	}
	p, grad := make([]float32, m.NumParams()), make([]float32, m.NumParams())
	m.InitParams(p, 1)
	x, y := make([]float32, batch*64), make([]int32, batch)
	for i := range x {
		x[i] = float32(i%17) / 17
	}
	for i := range y {
		y[i] = int32(i % 10)
	}
	opt := NewSGD(len(p), 0.01, 0.9, 1e-4)
	for _, lib := range gemm.Built() {
		m.Gemm = openGemm(b, lib.Name)
		b.Run(lib.Name, func(b *testing.B) {
			var ws Workspace
			cpu, best := cpuTime(b), time.Duration(math.MaxInt64)
			for b.Loop() {
				t0 := time.Now()
				m.LossGrad(p, grad, x, y, &ws)
				opt.Step(p, grad)
				best = min(best, time.Since(t0))
			}
			s, c := b.Elapsed().Seconds(), cpu()
			b.ReportMetric(flops*float64(b.N)/s/1e9, "GFLOP/s")
			b.ReportMetric(batch*float64(b.N)/s, "samples/s")
			b.ReportMetric(flops*float64(b.N)/c/1e9, "GFLOP/cpu-s")
			b.ReportMetric(flops/best.Seconds()/1e9, "best-GFLOP/s")
		})
	}
}

// Besides the mean over the run (GFLOP/s, and per CPU second), the step and
// the peak report their fastest iteration (best-GFLOP/s): on a loaded
// machine the one least disturbed, the estimator nccl-tests' and OSU's
// minimum columns give.

// cpuTime returns a function giving the process's CPU seconds (user and
// system) since cpuTime was called. On a machine shared with other work a
// one-thread benchmark's wall time counts the time it waited for a core;
// its CPU time does not: GFLOP/cpu-s is the figure that compares across
// runs there (run with GOMAXPROCS=1 OMP_NUM_THREADS=1, one thread busy).
func cpuTime(b *testing.B) func() float64 {
	now := func() float64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	start := now()
	return func() float64 { return now() - start }
}

// BenchmarkPeak is the machine's practical FP32 peak: a 2048³ SGEMM from
// every library built in (the best BLAS here gives the ceiling the step's
// GFLOP/s is held against), at the rank's thread count.
func BenchmarkPeak(b *testing.B) {
	const n = 2048
	a, w, z := linearOperands(n, n, n)
	for _, lib := range gemm.Built() {
		g := openGemm(b, lib.Name)
		b.Run(lib.Name, func(b *testing.B) {
			cpu, best := cpuTime(b), time.Duration(math.MaxInt64)
			for b.Loop() {
				t0 := time.Now()
				g.Sgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, a, n, w, n, 0, z, n)
				best = min(best, time.Since(t0))
			}
			b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(2*n*n*n*float64(b.N)/cpu()/1e9, "GFLOP/cpu-s")
			b.ReportMetric(2*n*n*n/best.Seconds()/1e9, "best-GFLOP/s")
		})
	}
}
