package trainer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"testing"

	"github.com/batchkit/batchkit/trainer/gemm"
)

// torchPython is Debian's interpreter with python3-torch (make test
// installs it); another python3 may come first on PATH.
const torchPython = "/usr/bin/python3"

// torchJob is what testdata/torch_sgd_steps.py reads.
type torchJob struct {
	Sizes []int `json:"sizes"`
	// float32, as batchkit trains with them: JSON carries their shortest
	// decimal, which torch reads back as the same float32.
	LR          float32        `json:"lr"`
	Momentum    float32        `json:"momentum"`
	WeightDecay float32        `json:"weight_decay"`
	Params      []float32      `json:"params"`
	Steps       [][]torchBatch `json:"steps"` // per step, per rank
}

type torchBatch struct {
	X [][]float32 `json:"x"`
	Y []int32     `json:"y"`
}

type torchResult struct {
	Losses []float64 `json:"losses"`
	Params []float32 `json:"params"`
}

// TestMatchesPyTorchSGD trains with batchkit (Train on in-process ranks, the
// code batchkit train runs) and replays the same steps in PyTorch
// (torch.optim.SGD with momentum and weight decay, DDP's averaged gradient,
// F.cross_entropy) from the same initial weights and the same batches: every
// step's loss and the final weights agree within float32 rounding, at 1 and
// 2 ranks, with every GEMM library built in (make test-blas runs it with
// oneMKL and OpenBLAS), with two hidden layers and a short last batch (seen: losses
// within 1.1e-7 relative, weights within 6e-8). The control: PyTorch
// without the weight decay (1e-4, a shrink of 5e-7·w a step) ends 80–200×
// the tolerance away, so a missing or misapplied term would not pass.
func TestMatchesPyTorchSGD(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PyTorch")
	}
	if out, err := exec.Command(torchPython, "-c", "import torch").CombinedOutput(); err != nil {
		requireTorch(t, fmt.Sprintf("%s cannot import torch (apt-get install python3-torch): %v %s", torchPython, err, out))
	}
	full, test := digitsSplit(t)
	rows := 100 // 2 ranks: 50 each, batches of 16, 16, 16 and 2
	small := &Dataset{X: full.X[:rows*full.Features], Y: full.Y[:rows], Features: full.Features, Classes: full.Classes}
	cfg := Config{Hidden: []int{32, 16}, Epochs: 3, BatchSize: 16, LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4, Seed: 7}
	for _, lib := range gemm.Built() {
		for _, world := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d ranks", lib.Name, world), func(t *testing.T) {
				compareWithTorch(t, small, test, cfg, openGemm(t, lib.Name), world)
			})
		}
	}
}

// compareWithTorch is one case of TestMatchesPyTorchSGD.
func compareWithTorch(t *testing.T, small, test *Dataset, cfg Config, g gemm.Impl, world int) {
	cfg.Gemm = g
	var losses []float64
	res, errs := trainWorld(world, small, test, func(rank int) Config {
		c := cfg
		if rank == 0 {
			c.OnStep = func(s StepInfo) error { losses = append(losses, s.Loss); return nil }
		}
		return c
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	job := torchJobFor(res[0].Model, small, cfg, world)
	got := runTorch(t, job)
	lossTol, paramTol := 1e-6, 1e-6 // seen: 1.1e-7 and 6e-8
	if len(got.Losses) != len(losses) {
		t.Fatalf("PyTorch made %d steps, batchkit %d", len(got.Losses), len(losses))
	}
	worstLoss := 0.0
	for i := range losses {
		d := math.Abs(got.Losses[i]-losses[i]) / math.Abs(got.Losses[i])
		worstLoss = max(worstLoss, d)
		if d > lossTol {
			t.Errorf("step %d: loss %.9g, PyTorch %.9g (relative difference %.2g > %g)", i+1, losses[i], got.Losses[i], d, lossTol)
		}
	}
	diff, moved := maxAbsDiff(res[0].Params, got.Params), maxAbsDiff(res[0].Params, job.Params)
	t.Logf("%d steps: losses within %.2g (relative), weights within %.2g; the weights moved by up to %.3g", len(losses), worstLoss, diff, moved)
	if diff > paramTol {
		t.Errorf("final weights differ from PyTorch's by up to %.3g (> %g)", diff, paramTol)
	}
	if moved < 1000*paramTol {
		t.Errorf("the weights moved by only %.3g in training: the comparison says little", moved)
	}
	job.WeightDecay = 0
	c := maxAbsDiff(res[0].Params, runTorch(t, job).Params)
	t.Logf("PyTorch without weight decay: weights %.3g away", c)
	if c < 10*paramTol {
		t.Errorf("PyTorch without weight decay ends within %.3g of batchkit: the tolerance cannot tell the difference", c)
	}
}

// requireTorch skips for reason, unless BATCHKIT_REQUIRE_CLUSTER=1 (make
// test, which installs python3-torch): then it fails.
func requireTorch(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("BATCHKIT_REQUIRE_CLUSTER") == "1" {
		t.Fatal(reason + " (BATCHKIT_REQUIRE_CLUSTER=1)")
	}
	t.Skip(reason)
}

// torchJobFor is the run of cfg on world ranks as PyTorch replays it: the
// initial parameters and every step's batches, taken as Train takes them
// (Permutation, Shard, StepsPerEpoch).
func torchJobFor(m MLP, d *Dataset, cfg Config, world int) torchJob {
	p := make([]float32, m.NumParams())
	m.InitParams(p, cfg.Seed)
	job := torchJob{Sizes: m.Sizes, LR: cfg.LR, Momentum: cfg.Momentum, WeightDecay: cfg.WeightDecay, Params: p}
	steps := StepsPerEpoch(d.Rows(), world, cfg.BatchSize)
	for e := range cfg.Epochs {
		perm := Permutation(cfg.Seed, e, d.Rows())
		for s := range steps {
			var ranks []torchBatch
			for r := range world {
				shard := Shard(perm, r, world)
				var b torchBatch
				for _, j := range shard[s*cfg.BatchSize : min((s+1)*cfg.BatchSize, len(shard))] {
					b.X = append(b.X, d.Row(j))
					b.Y = append(b.Y, d.Y[j])
				}
				ranks = append(ranks, b)
			}
			job.Steps = append(job.Steps, ranks)
		}
	}
	return job
}

func runTorch(t *testing.T, job torchJob) torchResult {
	t.Helper()
	in, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(torchPython, "testdata/torch_sgd_steps.py")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("torch_sgd_steps.py: %v\n%s", err, stderr.Bytes())
	}
	var res torchResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("torch_sgd_steps.py's output: %v", err)
	}
	if len(res.Params) != len(job.Params) {
		t.Fatalf("PyTorch returned %d parameters, want %d", len(res.Params), len(job.Params))
	}
	return res
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}
