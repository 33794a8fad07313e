package trainer

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// refSGD is the update as two passes made it before StepMean: the sum
// divided by n (x/n, the quotient collective's Avg gives), then Step's
// arithmetic, in the plainest Go.
func refSGD(p, sum, buf []float32, n int, lr, momentum, weightDecay float32) {
	for i := range p {
		g := sum[i] / float32(n)
		d := g + weightDecay*p[i]
		buf[i] = momentum*buf[i] + d
		p[i] -= lr * buf[i]
	}
}

// TestSGDKernelBitIdentical: Step, and StepMean over 1-6 ranks (the mean
// a product or a quotient), give the two-pass reference's bits over steps,
// in Go and in the update this build runs (C in a cgo BLAS build), on a
// length that is no multiple of any vector width, with the values of a real
// run's scale; StepMean leaves every gradient +0, Step leaves it alone.
func TestSGDKernelBitIdentical(t *testing.T) {
	const size = 100_003
	for _, k := range []struct {
		name string
		step func(p, g, buf []float32, lr, momentum, weightDecay float32, mode sgdMode, f float32) bool
	}{{"Go", sgdGo}, {"build", sgdStep}} {
		for _, ranks := range []int{0, 1, 2, 3, 4, 6} { // 0: Step
			t.Run(fmt.Sprintf("%s/ranks=%d", k.name, ranks), func(t *testing.T) {
				p1, g, b1 := make([]float32, size), make([]float32, size), make([]float32, size)
				for i := range p1 {
					p1[i] = float32(math.Sin(float64(i)))
				}
				p2, b2 := slices.Clone(p1), slices.Clone(b1)
				opt := &SGD{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4, Buf: b2}
				for step := range 5 {
					for i := range g {
						g[i] = float32(math.Cos(float64(i+step))) / 100
					}
					refSGD(p1, g, b1, max(ranks, 1), 0.05, 0.9, 1e-4)
					mode, f := sgdPlain, float32(1)
					if ranks > 0 {
						mode, f = meanMode(ranks)
					}
					kept := slices.Clone(g)
					if !k.step(p2, g, opt.Buf, opt.LR, opt.Momentum, opt.WeightDecay, mode, f) {
						t.Fatalf("step %d: finite reported as not finite", step)
					}
					if i := firstDiff(p1, p2); i >= 0 {
						t.Fatalf("step %d: parameter %d is %g, the reference's %g", step, i, p2[i], p1[i])
					}
					if i := firstDiff(b1, opt.Buf); i >= 0 {
						t.Fatalf("step %d: momentum %d is %g, the reference's %g", step, i, opt.Buf[i], b1[i])
					}
					want := kept
					if ranks > 0 {
						want = make([]float32, size)
					}
					if i := firstDiff(want, g); i >= 0 {
						t.Fatalf("step %d: gradient %d is %g after the update, want %g", step, i, g[i], want[i])
					}
				}
			})
		}
	}
}

// StepMean gives the reference's bits through the method the loop calls,
// a product at 1, 2 and 8 ranks, a quotient at 3.
func TestStepMeanIsTheReference(t *testing.T) {
	for _, ranks := range []int{1, 2, 3, 8} {
		p1, sum, b1 := make([]float32, 1003), make([]float32, 1003), make([]float32, 1003)
		for i := range p1 {
			p1[i], sum[i] = float32(math.Sin(float64(i))), float32(math.Cos(float64(i)))
		}
		p2, s2 := slices.Clone(p1), slices.Clone(sum)
		refSGD(p1, sum, b1, ranks, 0.1, 0.9, 1e-4)
		opt := NewSGD(len(p2), 0.1, 0.9, 1e-4)
		opt.StepMean(p2, s2, ranks)
		if i := firstDiff(p1, p2); i >= 0 {
			t.Errorf("%d ranks: parameter %d is %g, the reference's %g", ranks, i, p2[i], p1[i])
		}
		if i := slices.IndexFunc(s2, func(v float32) bool { return math.Float32bits(v) != 0 }); i >= 0 {
			t.Errorf("%d ranks: gradient %d is %g after StepMean, want +0", ranks, i, s2[i])
		}
	}
}

// The update reports a parameter that is not finite after it, wherever it
// is (the vector loop's body and its scalar tail), in Go and in the build's
// kernel: the training loop's divergence check relies on it and no longer
// scans the weights itself.
func TestSGDReportsNonFinite(t *testing.T) {
	const n = 1003 // a tail after any vector width
	for _, tc := range []struct {
		name string
		at   int
		g    float32 // the gradient there
		p    float32 // the parameter there
	}{
		{"NaN gradient", 17, float32(math.NaN()), 1},
		{"NaN gradient in the tail", n - 1, float32(math.NaN()), 1},
		{"+Inf gradient", 500, float32(math.Inf(1)), 1},
		{"-Inf parameter", 0, 0, float32(math.Inf(-1))},
		{"overflow", n - 2, -math.MaxFloat32, math.MaxFloat32},
	} {
		for _, k := range []struct {
			name string
			step func(p, g, buf []float32, lr, momentum, weightDecay float32) bool
		}{{"Go", func(p, g, buf []float32, lr, momentum, weightDecay float32) bool {
			return sgdGo(p, g, buf, lr, momentum, weightDecay, sgdPlain, 1)
		}}, {"build", func(p, g, buf []float32, lr, momentum, weightDecay float32) bool {
			return sgdStep(p, g, buf, lr, momentum, weightDecay, sgdPlain, 1)
		}}, {"build, mean of 2", func(p, g, buf []float32, lr, momentum, weightDecay float32) bool {
			return sgdStep(p, g, buf, lr, momentum, weightDecay, sgdMulClear, 0.5)
		}}, {"build, mean of 3", func(p, g, buf []float32, lr, momentum, weightDecay float32) bool {
			return sgdStep(p, g, buf, lr, momentum, weightDecay, sgdDivClear, 3)
		}}} {
			t.Run(tc.name+"/"+k.name, func(t *testing.T) {
				p, g, buf := make([]float32, n), make([]float32, n), make([]float32, n)
				for i := range p {
					p[i], g[i] = 1, 0.5
				}
				if !k.step(p, g, buf, 1, 0.9, 1e-4) {
					t.Fatal("finite parameters reported as not finite")
				}
				p[tc.at], g[tc.at] = tc.p, tc.g
				if k.step(p, g, buf, 1, 0.9, 1e-4) {
					t.Errorf("parameter %d is %g after the update, reported finite", tc.at, p[tc.at])
				}
			})
		}
	}
}

func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}
