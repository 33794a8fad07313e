package trainer

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// TestSGDKernelBitIdentical: the update this build runs (C in a cgo BLAS
// build) gives Go's bit for bit, over steps, on a length that is no
// multiple of any vector width, with the values of a real run's scale;
// asked to clear the gradient, it gives the same numbers and leaves every
// gradient +0.
func TestSGDKernelBitIdentical(t *testing.T) {
	const n = 100_003
	for _, zero := range []bool{false, true} {
		t.Run(fmt.Sprintf("clear=%v", zero), func(t *testing.T) {
			p1, g, b1 := make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range p1 {
				p1[i] = float32(math.Sin(float64(i)))
			}
			p2, b2 := slices.Clone(p1), slices.Clone(b1)
			for step := range 5 {
				for i := range g {
					g[i] = float32(math.Cos(float64(i+step))) / 100
				}
				f1 := sgdGo(p1, g, b1, 0.05, 0.9, 1e-4)
				f2 := sgdStep(p2, g, b2, 0.05, 0.9, 1e-4, zero)
				if !f1 || !f2 {
					t.Fatalf("step %d: finite reported as %v (Go) and %v, want true", step, f1, f2)
				}
				if i := firstDiff(p1, p2); i >= 0 {
					t.Fatalf("step %d: parameter %d is %g, Go's %g", step, i, p2[i], p1[i])
				}
				if i := firstDiff(b1, b2); i >= 0 {
					t.Fatalf("step %d: momentum %d is %g, Go's %g", step, i, b2[i], b1[i])
				}
				if i := slices.IndexFunc(g, func(v float32) bool { return math.Float32bits(v) != 0 }); zero && i >= 0 {
					t.Fatalf("step %d: gradient %d is %g after the update, want +0", step, i, g[i])
				}
			}
		})
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
		}{{"Go", sgdGo}, {"build", func(p, g, buf []float32, lr, momentum, weightDecay float32) bool {
			return sgdStep(p, g, buf, lr, momentum, weightDecay, false)
		}}, {"build, clearing", func(p, g, buf []float32, lr, momentum, weightDecay float32) bool {
			return sgdStep(p, g, buf, lr, momentum, weightDecay, true)
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
