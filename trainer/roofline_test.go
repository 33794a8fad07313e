package trainer

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective"
	"github.com/batchkit/batchkit/trainer/gemm"
)

// streamSizes are BenchmarkStream's and BenchmarkSGDUpdate's array lengths:
// far beyond the caches (64 MiB an array against a 32 MiB L3: the DRAM
// figure) and the compute-bound model's parameter vector (4.5 MB: the
// regime of the SGD update, whose three vectors fit in the L3).
func streamSizes(b *testing.B) []struct {
	name string
	n    int
} {
	m, err := NewMLP(64, []int{1024, 1024}, 10)
	if err != nil {
		b.Fatal(err)
	}
	return []struct {
		name string
		n    int
	}{{"dram", 16 << 20}, {"params", m.NumParams()}}
}

// BenchmarkStream is the machine's memory bandwidth as STREAM measures it
// (copy c=a, scale b=q·c, triad a=b+q·c; GB/s counts the bytes the kernel
// reads and writes, not the write-allocate reads). copy is Go's memmove
// (vector loads and stores: the bandwidth itself); scale and triad are Go
// loops like the step's own non-GEMM passes, scalar, which at the L3's
// speed measure the loop, not the memory. The roofline of the step in
// docs/performance.md divides each pass's bytes by these.
func BenchmarkStream(b *testing.B) {
	for _, size := range streamSizes(b) {
		x, y, z := make([]float32, size.n), make([]float32, size.n), make([]float32, size.n)
		for i := range x {
			x[i], y[i], z[i] = 1, 2, 0
		}
		const q = 3
		for _, k := range []struct {
			name   string
			arrays int
			run    func()
		}{
			{"copy", 2, func() { copy(z, x) }},
			{"scale", 2, func() {
				z := z[:len(y)]
				for i := range y {
					y[i] = q * z[i]
				}
			}},
			{"triad", 3, func() {
				y, z := y[:len(x)], z[:len(x)]
				for i := range x {
					x[i] = y[i] + q*z[i]
				}
			}},
		} {
			b.Run(fmt.Sprintf("%s/%s", size.name, k.name), func(b *testing.B) {
				for b.Loop() {
					k.run()
				}
				b.ReportMetric(float64(4*k.arrays*size.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkSGDUpdate is the update alone (the C loop in a cgo build: a
// vectorised STREAM of five arrays) at streamSizes: 20 bytes a parameter
// (p, g, buf read; p, buf written), as GB/s to hold against BenchmarkStream.
func BenchmarkSGDUpdate(b *testing.B) {
	for _, size := range streamSizes(b) {
		n := size.n
		p, g := make([]float32, n), make([]float32, n)
		for i := range p {
			p[i], g[i] = 1e-3*float32(i%1000), 1e-6*float32(i%777)
		}
		opt := NewSGD(n, 0.01, 0.9, 1e-4)
		b.Run(size.name, func(b *testing.B) {
			for b.Loop() {
				opt.Step(p, g)
			}
			b.ReportMetric(float64(20*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkTrainStep is the training loop's step in the compute-bound
// configuration (1 rank, hidden 1024,1024, batch 64, the digits), as
// `batchkit train` runs it at 1 rank and make bench-train times it: Train
// on the collective's self backend, each step timed from OnStepBegin to
// OnStep (the batch's copy, LossGrad, the gradient's mean, the update, the
// divergence check and the bookkeeping; not the evaluations). GFLOP/s
// counts bench-train's 6.75 MFLOP a sample (forward 2·in·out a layer,
// backward twice that), over the steps' time and over the fastest step's;
// BenchmarkStep is the same work without the loop around it.
func BenchmarkTrainStep(b *testing.B) {
	train, test := digitsSplit(b)
	hidden := []int{1024, 1024}
	m, err := NewMLP(train.Features, hidden, 10)
	if err != nil {
		b.Fatal(err)
	}
	perSample := 0.0
	for i := 1; i < len(m.Sizes); i++ {
		perSample += 6 * float64(m.Sizes[i-1]*m.Sizes[i])
	}
	for _, lib := range gemm.Built() {
		b.Run(lib.Name, func(b *testing.B) {
			c, err := collective.Init(collective.Config{Topology: topology.Topology{Launcher: topology.Single, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			cfg := Config{Hidden: hidden, BatchSize: 64, LR: 0.01, Momentum: 0.9, WeightDecay: 1e-4, Seed: 1, Gemm: openGemm(b, lib.Name)}
			steps := StepsPerEpoch(train.Rows(), 1, cfg.BatchSize)
			cfg.Epochs = (b.N + steps - 1) / steps
			var (
				t0          time.Time
				total, best = time.Duration(0), time.Duration(math.MaxInt64)
			)
			cfg.OnStepBegin = func() { t0 = time.Now() }
			cfg.OnStep = func(s StepInfo) error {
				d := time.Since(t0)
				total += d
				if s.GlobalStep%steps != 0 { // an epoch's last batch is short
					best = min(best, d)
				}
				return nil
			}
			b.ResetTimer()
			if _, err := Train(FromCollective(c), train, test, cfg); err != nil {
				b.Fatal(err)
			}
			samples := float64(cfg.Epochs * train.Rows())
			b.ReportMetric(perSample*samples/total.Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(perSample*float64(cfg.BatchSize)/best.Seconds()/1e9, "best-GFLOP/s")
			b.ReportMetric(samples/total.Seconds(), "samples/s")
			b.ReportMetric(total.Seconds()*1e3/float64(cfg.Epochs*steps), "ms/step")
		})
	}
}

// BenchmarkReluPasses is the step's ReLU passes at the compute-bound
// configuration's size (64 × 1024, a hidden layer): the forward ReLU and the
// backward mask with its bias sum, in Go and as this build runs them (C in
// a cgo build). GB/s counts what each reads and writes.
func BenchmarkReluPasses(b *testing.B) {
	const n, out = 64, 1024
	a, da, gb := make([]float32, n*out), make([]float32, n*out), make([]float32, out)
	for i := range a {
		a[i], da[i] = float32(math.Sin(float64(i))), float32(math.Cos(float64(i)))
	}
	z := make([]float32, n*out)
	for _, k := range []struct {
		name  string
		bytes int
		run   func()
	}{
		{"forward/go", 8 * n * out, func() { copy(z, a); reluForwardGo(z) }},
		{"forward/build", 8 * n * out, func() { copy(z, a); reluForward(z) }},
		{"backward/go", 12 * n * out, func() { reluBackwardGo(da, a, gb, n) }},
		{"backward/build", 12 * n * out, func() { reluBackward(da, a, gb, n) }},
	} {
		b.Run(k.name, func(b *testing.B) {
			for b.Loop() {
				k.run()
			}
			b.ReportMetric(float64(k.bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
