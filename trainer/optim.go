package trainer

import (
	"fmt"
	"math"

	"github.com/batchkit/batchkit/trainer/collective"
)

// SGD is stochastic gradient descent with momentum and weight decay, with
// PyTorch's semantics (torch.optim.SGD, dampening 0, not Nesterov):
//
//	d = g + WeightDecay·p
//	buf = Momentum·buf + d   (torch: buf = d on the first step)
//	p -= LR·buf
//
// Buf starts at zero, which makes the first step's Momentum·0 + d exactly d:
// no "first step" flag to checkpoint. Buf is the state saved with the
// parameters.
type SGD struct {
	LR, Momentum, WeightDecay float32
	Buf                       []float32
}

// NewSGD is an optimizer for n parameters.
func NewSGD(n int, lr, momentum, weightDecay float32) *SGD {
	return &SGD{LR: lr, Momentum: momentum, WeightDecay: weightDecay, Buf: make([]float32, n)}
}

// Step updates p in place from the gradient g and reports whether every
// updated parameter is finite: the training loop's divergence check, made
// in the pass that writes them rather than in a second pass over the
// model's bytes (docs/performance.md, "The step's roofline").
func (o *SGD) Step(p, g []float32) (finite bool) {
	return sgdStep(p, g[:len(p)], o.Buf[:len(p)], o.LR, o.Momentum, o.WeightDecay, sgdPlain, 1)
}

// StepMean is Step with the gradient sum/n: the mean of n ranks' gradients
// whose sum an allreduce left in sum, each element made in this pass as
// collective's Avg makes it (collective.MeanScale: the same bits) rather
// than by a pass of its own over the model's bytes. It leaves sum all +0,
// for a LossGrad that then adds the next gradient onto it
// (Workspace.GradCleared) instead of having the BLAS zero it first.
func (o *SGD) StepMean(p, sum []float32, n int) (finite bool) {
	if n < 1 {
		panic(fmt.Sprintf("trainer: StepMean over %d ranks", n))
	}
	mode, f := meanMode(n)
	return sgdStep(p, sum[:len(p)], o.Buf[:len(p)], o.LR, o.Momentum, o.WeightDecay, mode, f)
}

// meanMode is the update's mode and factor for the mean of n ranks' sum.
func meanMode(n int) (sgdMode, float32) {
	f, mul := collective.MeanScale[float32](n)
	if mul {
		return sgdMulClear, f
	}
	return sgdDivClear, f
}

// sgdMode is how the update reads the gradient and what it leaves there
// (optim.h's BK_SGD_* values).
type sgdMode int

const (
	sgdPlain    sgdMode = iota // g as it is, left as it is
	sgdMulClear                // g·f, g left +0
	sgdDivClear                // g/f, g left +0
)

// sgdGo is the update in Go. A cgo build (tag openblas or mkl: a C
// compiler is there anyway) runs sgdStep in C instead (optim_cgo.go), the
// same operations in the same order vectorised, bit for bit these
// (TestSGDKernelBitIdentical): one pass over three arrays of the model's
// size, a sixth of a compute-bound step in Go, a 4× faster loop in C.
// It reports whether every new p is finite: a float32 is ±Inf or NaN when
// its exponent bits are all ones, and only then does adding 1 to the
// exponent field carry into the sign bit, which the OR keeps (integer
// operations beside the float ones, no branch: the loop runs no slower
// than without the check, the separate scan cost half the update).
func sgdGo(p, g, buf []float32, lr, momentum, weightDecay float32, mode sgdMode, f float32) (finite bool) {
	g, buf = g[:len(p)], buf[:len(p)]
	var carry uint32
	switch mode { // outside the loops: a switch per element cost the loop a fifth
	case sgdPlain:
		for i := range p {
			carry |= sgdOne(&p[i], &buf[i], g[i], lr, momentum, weightDecay)
		}
	case sgdMulClear:
		for i := range p {
			carry |= sgdOne(&p[i], &buf[i], g[i]*f, lr, momentum, weightDecay)
			g[i] = 0
		}
	case sgdDivClear:
		for i := range p {
			carry |= sgdOne(&p[i], &buf[i], g[i]/f, lr, momentum, weightDecay)
			g[i] = 0
		}
	}
	return carry&signBit == 0
}

// sgdOne updates one parameter p and its momentum buf from its gradient gi
// and returns the new p's bits with 1 added to the exponent field (sgdGo's
// finiteness check).
func sgdOne(p, buf *float32, gi, lr, momentum, weightDecay float32) uint32 {
	d := gi + weightDecay*(*p)
	b := momentum*(*buf) + d
	*buf = b
	q := *p - lr*b
	*p = q
	return math.Float32bits(q)&expBits + 1<<23
}

// The exponent and sign bits of a float32.
const expBits, signBit = 0x7f800000, 0x80000000
