package trainer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"

	"github.com/batchkit/batchkit/trainer/gemm"
)

// MLP is a multi-layer perceptron: Linear layers with ReLU between them and
// softmax cross-entropy on the last. Sizes is [inputs, hidden..., classes].
// Its parameters live in one []float32 (NumParams long), layer by layer, each
// layer's weights (out×in, row-major, as torch.nn.Linear stores them) then its
// biases: the gradient is one buffer, averaged in buckets of whole layers
// (buckets.go).
type MLP struct {
	Sizes []int
	// Gemm multiplies the layers' matrices (nil: gonum's pure Go). The
	// choice changes the float32 rounding, not the training: the loss
	// curves agree within float32 noise (TestLossCurvesAgree).
	Gemm gemm.Impl
}

// MaxParams caps the model at 256 Mi parameters (1 GiB of float32).
const MaxParams = 1 << 28

// NewMLP checks the layer sizes.
func NewMLP(features int, hidden []int, classes int) (MLP, error) {
	sizes := append(append([]int{features}, hidden...), classes)
	total := 0
	for i, s := range sizes {
		if s < 1 {
			return MLP{}, fmt.Errorf("layer %d has %d units: want at least 1", i, s)
		}
		if i > 0 {
			total += sizes[i-1]*s + s
			if total > MaxParams || sizes[i-1] > MaxParams || s > MaxParams {
				return MLP{}, fmt.Errorf("more than %d parameters", MaxParams)
			}
		}
	}
	return MLP{Sizes: sizes}, nil
}

// NumParams is the length of the parameter vector.
func (m MLP) NumParams() int {
	n := 0
	for i := 1; i < len(m.Sizes); i++ {
		n += m.Sizes[i-1]*m.Sizes[i] + m.Sizes[i]
	}
	return n
}

// layer is one Linear layer's slices of a parameter (or gradient) vector.
type layer struct {
	in, out int
	w, b    []float32
}

func (m MLP) layers(p []float32) []layer {
	ls := make([]layer, 0, len(m.Sizes)-1)
	off := 0
	for i := 1; i < len(m.Sizes); i++ {
		in, out := m.Sizes[i-1], m.Sizes[i]
		l := layer{in: in, out: out, w: p[off : off+in*out]}
		off += in * out
		l.b = p[off : off+out]
		off += out
		ls = append(ls, l)
	}
	return ls
}

// InitParams fills p as torch.nn.Linear's default does, uniform in
// ±1/sqrt(fan_in) for weights and biases (He/Kaiming-uniform with a=√5),
// drawn from PCG(seed, initStream) in parameter order: a pure function of
// the seed and the sizes.
func (m MLP) InitParams(p []float32, seed uint64) {
	rng := rand.NewPCG(seed, initStream)
	for _, l := range m.layers(p) {
		bound := float32(1 / math.Sqrt(float64(l.in)))
		for _, s := range [][]float32{l.w, l.b} {
			for i := range s {
				u := float32(rng.Uint64()>>40) / (1 << 24) // [0, 1), exact
				s[i] = (2*u - 1) * bound
			}
		}
	}
}

// initStream separates the init's PCG stream from the sampler's.
const initStream = 0x6d6c70696e6974 // "mlpinit"

// Workspace holds one batch's activations and their gradients; reused
// across steps so that a step allocates nothing.
type Workspace struct {
	acts, dacts [][]float32 // per layer boundary: batch × Sizes[i]
	batch       int

	// GradCleared says that the next LossGrad's grad is all +0
	// (SGD.StepMean left it so): its weight-gradient products then add
	// onto it (beta 1) rather than have the BLAS zero it first (beta 0),
	// the same numbers with one pass fewer over the weights' size.
	// LossGrad resets it.
	GradCleared bool
}

func (m MLP) workspace(ws *Workspace, batch int) {
	if ws.batch >= batch && len(ws.acts) == len(m.Sizes) {
		return
	}
	ws.acts, ws.dacts = make([][]float32, len(m.Sizes)), make([][]float32, len(m.Sizes))
	for i, s := range m.Sizes {
		ws.acts[i], ws.dacts[i] = make([]float32, batch*s), make([]float32, batch*s)
	}
	ws.batch = batch
}

// forward computes the logits of the n samples in x (n × Sizes[0]) into
// ws.acts; ws.acts[0] is x itself.
func (m MLP) forward(p, x []float32, n int, ws *Workspace) {
	m.workspace(ws, n)
	ws.acts[0] = x
	g := m.gemm()
	for i, l := range m.layers(p) {
		a, z := ws.acts[i][:n*l.in], ws.acts[i+1][:n*l.out]
		for r := range n {
			copy(z[r*l.out:(r+1)*l.out], l.b)
		}
		// z = a · wᵀ + z
		g.Sgemm(blas.NoTrans, blas.Trans, n, l.out, l.in, 1, a, l.in, l.w, l.in, 1, z, l.out)
		if i < len(m.Sizes)-2 {
			reluForward(z)
		}
	}
}

// gemm is m's GEMM, gonum when none was given.
func (m MLP) gemm() gemm.Impl {
	if m.Gemm == nil {
		return gemm.Default()
	}
	return m.Gemm
}

// LossGrad runs forward and backward on a batch of n samples (x, y) and
// writes into grad (NumParams long) the gradient of the mean loss over the
// batch. It returns the batch's summed loss and its correct predictions.
func (m MLP) LossGrad(p, grad, x []float32, y []int32, ws *Workspace) (lossSum float64, correct int) {
	return m.LossGradEach(p, grad, x, y, ws, nil)
}

// LossGradEach is LossGrad calling ready(i) (when not nil) as soon as layer
// i's gradient is final, from the last layer down to layer 0, while the
// layers before it are still to be computed: the step starts that layer's
// allreduce there (buckets.go), as DDP's gradient hooks do.
func (m MLP) LossGradEach(p, grad, x []float32, y []int32, ws *Workspace, ready func(layer int)) (lossSum float64, correct int) {
	n := len(y)
	m.forward(p, x, n, ws)
	last := len(m.Sizes) - 1
	k := m.Sizes[last]
	dz := ws.dacts[last][:n*k]
	lossSum, correct = softmaxXent(ws.acts[last][:n*k], y, k, dz)
	ls, gs := m.layers(p), m.layers(grad)
	g := m.gemm()
	var beta float32 // of the weight gradients' products: 0, or 1 onto a cleared grad
	if ws.GradCleared {
		beta, ws.GradCleared = 1, false
	}
	biasGrad(gs[len(gs)-1].b, dz, n)
	for i := len(ls) - 1; i >= 0; i-- {
		l, lg := ls[i], gs[i]
		a, dz := ws.acts[i][:n*l.in], ws.dacts[i+1][:n*l.out]
		// dW = dzᵀ · a; db = Σ rows of dz (made by the pass that made dz);
		// da = dz · W, masked by ReLU, and the layer below's db with it.
		g.Sgemm(blas.Trans, blas.NoTrans, l.out, l.in, n, 1, dz, l.out, a, l.in, beta, lg.w, l.in)
		if ready != nil {
			ready(i)
		}
		if i == 0 {
			break
		}
		da := ws.dacts[i][:n*l.in]
		g.Sgemm(blas.NoTrans, blas.NoTrans, n, l.in, l.out, 1, dz, l.out, l.w, l.in, 0, da, l.in)
		reluBackward(da, a, gs[i-1].b, n)
	}
	return lossSum, correct
}

// biasGrad sets gb (out long) to the sum of dz's n rows (n × out), adding
// them in row order.
func biasGrad(gb, dz []float32, n int) {
	clear(gb)
	out := len(gb)
	for r := range n {
		row := dz[r*out : (r+1)*out]
		gb := gb[:len(row)]
		for j, v := range row {
			gb[j] += v
		}
	}
}

// reluForwardGo is the ReLU, z = max(z, 0), in Go; a cgo build runs
// reluForward in C instead (relu_cgo.go), bit for bit this
// (TestReluForwardBitIdentical).
func reluForwardGo(z []float32) {
	for j, v := range z {
		z[j] = max(v, 0)
	}
}

// reluBackwardGo masks the gradient da (n × len(gb)) by the ReLU whose
// output was a (zero where a <= 0) and, in the same pass over da, sets gb
// to the sum of its masked rows as biasGrad does: the bias gradient of the
// layer whose output gradient da is. The mask is an AND with the bits of a
// compare (a CMOV, no branch to mispredict on half the units); the result
// is the branchy loop's, bit for bit (TestReluBackwardBitIdentical). A cgo
// build runs reluBackward in C instead (relu_cgo.go), vectorised.
func reluBackwardGo(da, a, gb []float32, n int) {
	clear(gb)
	out := len(gb)
	for r := range n {
		d := da[r*out : (r+1)*out]
		x, gb := a[r*out : (r+1)*out][:len(d)], gb[:len(d)]
		for j, v := range x {
			keep := uint32(math.MaxUint32)
			if v <= 0 {
				keep = 0
			}
			dj := math.Float32frombits(math.Float32bits(d[j]) & keep)
			d[j] = dj
			gb[j] += dj
		}
	}
}

// softmaxXent is the summed softmax cross-entropy of logits (n × k) against
// y, stable through the log-sum-exp shift by each row's maximum, and writes
// d(mean loss)/d(logits) into dz.
func softmaxXent(logits []float32, y []int32, k int, dz []float32) (lossSum float64, correct int) {
	n := len(y)
	for r := range n {
		z, d := logits[r*k:(r+1)*k], dz[r*k:(r+1)*k]
		best := 0
		for j, v := range z {
			if v > z[best] {
				best = j
			}
		}
		zmax := float64(z[best])
		var sum float64
		for _, v := range z {
			sum += math.Exp(float64(v) - zmax)
		}
		lse := zmax + math.Log(sum)
		lossSum += lse - float64(z[y[r]])
		if best == int(y[r]) {
			correct++
		}
		for j, v := range z {
			d[j] = float32(math.Exp(float64(v)-lse) / float64(n))
		}
		d[y[r]] -= float32(1 / float64(n))
	}
	return lossSum, correct
}

// Evaluate is the mean loss and the accuracy of p on d, in batches of 256.
func (m MLP) Evaluate(p []float32, d *Dataset) (loss, acc float64, err error) {
	if d.Features != m.Sizes[0] || d.Classes > m.Sizes[len(m.Sizes)-1] {
		return 0, 0, errors.New("data does not fit the model")
	}
	var ws Workspace
	k := m.Sizes[len(m.Sizes)-1]
	dz := make([]float32, 256*k)
	correct := 0
	for from := 0; from < d.Rows(); from += 256 {
		to := min(from+256, d.Rows())
		n := to - from
		m.forward(p, d.X[from*d.Features:to*d.Features], n, &ws)
		l, c := softmaxXent(ws.acts[len(m.Sizes)-1][:n*k], d.Y[from:to], k, dz[:n*k])
		loss += l
		correct += c
	}
	return loss / float64(d.Rows()), float64(correct) / float64(d.Rows()), nil
}
