package trainer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"

	"github.com/batchkit/batchkit/trainer/gemm"
)

// refLossGrad is LossGrad as it was before its passes were fused (issue 33
// §2): the bias gradient a pass of its own after each weight gradient, the
// ReLU mask a branchy loop after the input gradient. The fused step must
// give its bits exactly.
func refLossGrad(m MLP, p, grad, x []float32, y []int32, ws *Workspace) (lossSum float64, correct int) {
	n := len(y)
	m.forward(p, x, n, ws)
	last := len(m.Sizes) - 1
	k := m.Sizes[last]
	lossSum, correct = softmaxXent(ws.acts[last][:n*k], y, k, ws.dacts[last][:n*k])
	ls, gs := m.layers(p), m.layers(grad)
	g := m.gemm()
	for i := len(ls) - 1; i >= 0; i-- {
		l, lg := ls[i], gs[i]
		a, dz := ws.acts[i][:n*l.in], ws.dacts[i+1][:n*l.out]
		g.Sgemm(blas.Trans, blas.NoTrans, l.out, l.in, n, 1, dz, l.out, a, l.in, 0, lg.w, l.in)
		clear(lg.b)
		for r := range n {
			for j, v := range dz[r*l.out : (r+1)*l.out] {
				lg.b[j] += v
			}
		}
		if i == 0 {
			break
		}
		da := ws.dacts[i][:n*l.in]
		g.Sgemm(blas.NoTrans, blas.NoTrans, n, l.in, l.out, 1, dz, l.out, l.w, l.in, 0, da, l.in)
		for j, v := range a {
			if v <= 0 {
				da[j] = 0
			}
		}
	}
	return lossSum, correct
}

// The fused backward pass gives the unfused one's gradient bit for bit,
// with every GEMM library built in, on a model of three hidden layers (so
// that a mask feeds a bias gradient twice) whose sizes are no multiple of
// a vector width, over a few SGD steps.
func TestLossGradFusedBitIdentical(t *testing.T) {
	m, err := NewMLP(13, []int{37, 29, 50}, 7)
	if err != nil {
		t.Fatal(err)
	}
	x, y := randomBatch(11, 13, 7, -1)
	for _, lib := range gemm.Built() {
		t.Run(lib.Name, func(t *testing.T) {
			m.Gemm = openGemm(t, lib.Name)
			p := make([]float32, m.NumParams())
			m.InitParams(p, 5)
			g1, g2 := make([]float32, len(p)), make([]float32, len(p))
			var ws1, ws2 Workspace
			opt := NewSGD(len(p), 0.1, 0.9, 1e-4)
			for step := range 4 {
				l1, c1 := refLossGrad(m, p, g1, x, y, &ws1)
				l2, c2 := m.LossGrad(p, g2, x, y, &ws2)
				if l1 != l2 || c1 != c2 {
					t.Fatalf("step %d: loss %v, %d correct; unfused %v, %d", step, l2, c2, l1, c1)
				}
				if i := firstDiff(g1, g2); i >= 0 {
					t.Fatalf("step %d: gradient %d is %g, unfused %g", step, i, g2[i], g1[i])
				}
				opt.Step(p, g2)
			}
		})
	}
}

// reluBackward's branch-free mask and its bias sum are the branchy loop's
// and biasGrad's on every kind of value: negative, ±0, NaN, ±Inf in the
// activation and in the gradient.
func TestReluBackwardBitIdentical(t *testing.T) {
	const n, out = 9, 21
	special := []float32{0, float32(math.Copysign(0, -1)), -1, 2, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40}
	rng := rand.New(rand.NewPCG(7, 8))
	a, da := make([]float32, n*out), make([]float32, n*out)
	for i := range a {
		a[i], da[i] = special[rng.IntN(len(special))], float32(rng.NormFloat64())
		if rng.IntN(4) == 0 {
			da[i] = special[rng.IntN(len(special))]
		}
	}
	want, wantB := slices.Clone(da), make([]float32, out)
	for j, v := range a {
		if v <= 0 {
			want[j] = 0
		}
	}
	biasGrad(wantB, want, n)
	gb := []float32{5, 5} // reluBackward clears it first
	gb = append(gb, make([]float32, out-2)...)
	reluBackward(da, a, gb, n)
	if i := firstDiff(want, da); i >= 0 {
		t.Errorf("masked gradient %d (activation %g): %g, want %g", i, a[i], da[i], want[i])
	}
	if i := firstDiff(wantB, gb); i >= 0 {
		t.Errorf("bias gradient %d: %g, want %g", i, gb[i], wantB[i])
	}
}

// The build's ReLU (C in a cgo build) is Go's max(v, 0) bit for bit on every
// kind of value, over a length with a tail after any vector width.
func TestReluForwardBitIdentical(t *testing.T) {
	special := []float32{0, float32(math.Copysign(0, -1)), -1, 2, float32(math.NaN()), float32(math.Inf(1)),
		float32(math.Inf(-1)), 1e-40, -1e-40, math.MaxFloat32, -math.MaxFloat32}
	rng := rand.New(rand.NewPCG(9, 10))
	z := make([]float32, 1003)
	for i := range z {
		z[i] = float32(rng.NormFloat64())
		if rng.IntN(3) == 0 {
			z[i] = special[rng.IntN(len(special))]
		}
	}
	want := slices.Clone(z)
	reluForwardGo(want)
	reluForward(z)
	if i := firstDiff(want, z); i >= 0 {
		t.Errorf("element %d: %g (%#x), want %g (%#x)", i, z[i], math.Float32bits(z[i]), want[i], math.Float32bits(want[i]))
	}
}

// A LossGrad onto a cleared gradient (Workspace.GradCleared: its weight
// gradients' products add onto +0 with beta 1) gives the bits of one that
// overwrites a gradient full of junk (beta 0), with every GEMM library, at
// a small odd shape and at the compute-bound one, full and short batches;
// an input column that is zero in every sample makes weight gradients that
// are sums of signed zeros, where a product written with beta 0 could
// keep a -0 that one added onto +0 would not.
func TestLossGradOntoClearedBitIdentical(t *testing.T) {
	for _, tc := range []struct {
		name       string
		in, out, n int
		hidden     []int
	}{
		{"small", 13, 7, 11, []int{37, 29, 50}},
		{"1024x1024, batch 64", 64, 10, 64, []int{1024, 1024}},
		{"1024x1024, short batch", 64, 10, 30, []int{1024, 1024}},
	} {
		m, err := NewMLP(tc.in, tc.hidden, tc.out)
		if err != nil {
			t.Fatal(err)
		}
		x, y := randomBatch(tc.n, tc.in, tc.out, 2)
		for _, lib := range gemm.Built() {
			t.Run(tc.name+"/"+lib.Name, func(t *testing.T) {
				m.Gemm = openGemm(t, lib.Name)
				p := make([]float32, m.NumParams())
				m.InitParams(p, 5)
				junk, cleared := make([]float32, len(p)), make([]float32, len(p))
				var ws1, ws2 Workspace
				opt := NewSGD(len(p), 0.1, 0.9, 1e-4)
				for step := range 3 {
					for i := range junk {
						junk[i] = float32(i%7) - 3
					}
					l1, c1 := m.LossGrad(p, junk, x, y, &ws1)
					ws2.GradCleared = step > 0 // the first step's gradient is a fresh zero slice either way
					l2, c2 := m.LossGrad(p, cleared, x, y, &ws2)
					if l1 != l2 || c1 != c2 {
						t.Fatalf("step %d: loss %v, %d correct onto the cleared gradient; %v, %d", step, l2, c2, l1, c1)
					}
					if i := firstDiff(junk, cleared); i >= 0 {
						t.Fatalf("step %d: gradient %d is %g (bits %#x) onto the cleared gradient, %g (%#x) with beta 0",
							step, i, cleared[i], math.Float32bits(cleared[i]), junk[i], math.Float32bits(junk[i]))
					}
					if ws2.GradCleared {
						t.Fatalf("step %d: GradCleared still set after LossGrad", step)
					}
					opt.StepMean(p, cleared, 1)
				}
			})
		}
	}
}

// randomBatch is n samples of in standard-normal features and labels below
// classes, from a fixed seed; column zero (when it is one) stays 0 in every
// sample.
func randomBatch(n, in, classes, zero int) ([]float32, []int32) {
	rng := rand.New(rand.NewPCG(3, 4))
	x, y := make([]float32, n*in), make([]int32, n)
	for i := range x {
		if i%in != zero {
			x[i] = float32(rng.NormFloat64())
		}
	}
	for i := range y {
		y[i] = int32(rng.IntN(classes))
	}
	return x, y
}
