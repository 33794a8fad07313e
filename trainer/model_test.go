package trainer

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The analytic gradient matches central finite differences of the loss.
func TestGradientFiniteDifferences(t *testing.T) {
	m, err := NewMLP(5, []int{7, 6}, 4)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]float32, m.NumParams())
	m.InitParams(p, 3)
	x := make([]float32, 3*5)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	y := []int32{0, 3, 1}
	grad := make([]float32, len(p))
	var ws Workspace
	m.LossGrad(p, grad, x, y, &ws)
	mean := func() float64 {
		g := make([]float32, len(p))
		l, _ := m.LossGrad(p, g, x, y, &Workspace{})
		return l / float64(len(y))
	}
	// Small enough that no ReLU input crosses 0 (a kink), large enough for
	// float32 forward passes.
	const h = 3e-3
	for i := range p {
		orig := p[i]
		p[i] = orig + h
		up := mean()
		p[i] = orig - h
		down := mean()
		p[i] = orig
		fd := (up - down) / (2 * h)
		if math.Abs(fd-float64(grad[i])) > 2e-3 {
			t.Errorf("param %d: analytic %g, finite difference %g", i, grad[i], fd)
		}
	}
}

// Softmax cross-entropy stays finite for huge logits.
func TestSoftmaxStable(t *testing.T) {
	dz := make([]float32, 3)
	loss, correct := softmaxXent([]float32{1e30, -1e30, 0}, []int32{0}, 3, dz)
	if loss != 0 || correct != 1 || dz[0] != 0 {
		t.Errorf("loss %g correct %d dz %v, want 0, 1, [0 ...]", loss, correct, dz)
	}
	loss, _ = softmaxXent([]float32{1000, 0}, []int32{1}, 2, dz[:2])
	if loss != 1000 {
		t.Errorf("loss %g, want 1000", loss)
	}
}

// One SGD step by hand, PyTorch's formulas.
func TestSGD(t *testing.T) {
	o := NewSGD(2, 0.5, 0.9, 0.1)
	p := []float32{1, -2}
	o.Step(p, []float32{1, 1}) // d = g + 0.1p = 1.1, 0.8; buf = d; p -= 0.5 buf
	o.Step(p, []float32{0, 0}) // d = 0.1p; buf = 0.9buf + d
	want := []float32{1 - 0.55, -2 - 0.4}
	want[0] -= 0.5 * (0.9*1.1 + 0.1*want[0])
	want[1] -= 0.5 * (0.9*0.8 + 0.1*want[1])
	if diff := cmp.Diff(want, p, cmp.Comparer(func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-6 })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// The same seed gives the same weights, bit for bit, twice.
func TestDeterministic(t *testing.T) {
	train, test := digitsSplit(t)
	cfg := defaults()
	cfg.Epochs = 3
	var sums []string
	for range 2 {
		res, errs := trainWorld(2, train, test, func(int) Config { return cfg })
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		sums = append(sums, WeightsSHA256(res[0].Params))
	}
	if sums[0] != sums[1] {
		t.Errorf("two runs with seed 1: %s and %s", sums[0], sums[1])
	}
	cfg.Seed = 2
	res, _ := trainWorld(1, train, test, func(int) Config { return cfg })
	if WeightsSHA256(res[0].Params) == sums[0] {
		t.Error("seed 2 gave the weights of seed 1")
	}
}

func TestNewMLPErrors(t *testing.T) {
	for _, h := range [][]int{{0}, {-1}, {1 << 20, 1 << 20}} {
		if _, err := NewMLP(64, h, 10); err == nil {
			t.Errorf("hidden %v: no error", h)
		}
	}
}
