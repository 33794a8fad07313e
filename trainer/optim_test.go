package trainer

import (
	"math"
	"slices"
	"testing"
)

// TestSGDKernelBitIdentical: the update this build runs (C in a cgo BLAS
// build) gives Go's bit for bit, over steps, on a length that is no
// multiple of any vector width, with the values of a real run's scale.
func TestSGDKernelBitIdentical(t *testing.T) {
	const n = 100_003
	p1, g, b1 := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range p1 {
		p1[i] = float32(math.Sin(float64(i)))
		g[i] = float32(math.Cos(float64(i))) / 100
	}
	p2, b2 := slices.Clone(p1), slices.Clone(b1)
	for step := range 5 {
		sgdGo(p1, g, b1, 0.05, 0.9, 1e-4)
		sgdStep(p2, g, b2, 0.05, 0.9, 1e-4)
		if i := firstDiff(p1, p2); i >= 0 {
			t.Fatalf("step %d: parameter %d is %g, Go's %g", step, i, p2[i], p1[i])
		}
		if i := firstDiff(b1, b2); i >= 0 {
			t.Fatalf("step %d: momentum %d is %g, Go's %g", step, i, b2[i], b1[i])
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
