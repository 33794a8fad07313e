package trainer

import (
	"math"
	"os"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas"

	"github.com/batchkit/batchkit/trainer/gemm"
)

// openGemm opens a library built in with the rank's thread count.
func openGemm(t testing.TB, name string) gemm.Impl {
	t.Helper()
	threads, _, err := gemm.Threads(os.Getenv, runtime.GOMAXPROCS(0))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gemm.Open(name, threads)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestLossCurvesAgree: every GEMM library built in (make test runs the
// package with -tags openblas and -tags mkl too) trains the digits to the
// same loss curve as gonum within float32 noise: each step's loss, each
// epoch's test loss and the final accuracy. The sums are rounded in other
// orders, so the curves are not bit-identical: a relative 1e-4 (20 times what was seen) bounds what
// a few epochs of float32 rounding moves them, a wrong GEMM (a transpose, a
// missed beta) moves them by far more.
func TestLossCurvesAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 5 epochs per library")
	}
	train, test := digitsSplit(t)
	curve := func(g gemm.Impl) (steps, epochs []float64, acc float64) {
		cfg := defaults()
		cfg.Epochs, cfg.Hidden, cfg.Gemm = 5, []int{128, 64}, g
		cfg.OnStep = func(s StepInfo) error { steps = append(steps, s.Loss); return nil }
		cfg.OnEpoch = func(e EpochInfo) error { epochs = append(epochs, e.TestLoss); return nil }
		res, errs := trainWorld(1, train, test, func(int) Config { return cfg })
		if errs[0] != nil {
			t.Fatal(errs[0])
		}
		return steps, epochs, res[0].TestAcc
	}
	wantSteps, wantEpochs, wantAcc := curve(nil)
	libs := gemm.Built()
	t.Logf("gonum: test loss by epoch %.6f, accuracy %.4f; libraries built in: %v", wantEpochs, wantAcc, libs)
	for _, lib := range libs {
		if lib.Name == gemm.Gonum {
			continue
		}
		steps, epochs, acc := curve(openGemm(t, lib.Name))
		if len(steps) != len(wantSteps) || len(epochs) != len(wantEpochs) {
			t.Fatalf("%s: %d steps, %d epochs; gonum %d, %d", lib.Name, len(steps), len(epochs), len(wantSteps), len(wantEpochs))
		}
		worst := 0.0
		for i := range steps {
			worst = max(worst, relDiff(steps[i], wantSteps[i]))
		}
		for i := range epochs {
			worst = max(worst, relDiff(epochs[i], wantEpochs[i]))
		}
		t.Logf("%s: test loss by epoch %.6f, accuracy %.4f, worst relative difference %.2g", lib.Name, epochs, acc, worst)
		if worst > 1e-4 || math.Abs(acc-wantAcc) > 0.01 {
			t.Errorf("%s: loss curve %.2g from gonum's (relative), accuracy %.4f against %.4f", lib.Name, worst, acc, wantAcc)
		}
	}
}

func relDiff(a, b float64) float64 { return math.Abs(a-b) / max(math.Abs(b), 1e-12) }

// TestLossGradUsesGemm: the model multiplies through the Impl it is given,
// in every layer: forward, and two GEMMs a layer backward (one for the
// first layer, which has no input gradient).
func TestLossGradUsesGemm(t *testing.T) {
	m, err := NewMLP(5, []int{7, 6}, 4)
	if err != nil {
		t.Fatal(err)
	}
	c := &countingGemm{Impl: gemm.Default()}
	m.Gemm = c
	p, grad := make([]float32, m.NumParams()), make([]float32, m.NumParams())
	m.InitParams(p, 1)
	x := make([]float32, 2*5)
	for i := range x {
		x[i] = float32(i) / 10
	}
	m.LossGrad(p, grad, x, []int32{0, 3}, &Workspace{})
	if want := 3 + 3 + 2; c.calls != want {
		t.Errorf("%d GEMM calls, want %d (3 forward, 3 weight gradients, 2 input gradients)", c.calls, want)
	}
}

type countingGemm struct {
	gemm.Impl
	calls int
}

func (c *countingGemm) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, cm []float32, ldc int) {
	c.calls++
	c.Impl.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, cm, ldc)
}
