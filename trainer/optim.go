package trainer

import "math"

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
	return sgdStep(p, g[:len(p)], o.Buf[:len(p)], o.LR, o.Momentum, o.WeightDecay, false)
}

// StepClear is Step that also sets g to +0 in the same pass, for a
// LossGrad that then adds the next gradient onto it (Workspace.GradCleared)
// instead of having the BLAS zero the weight gradients first: the cleared
// lines are written back with the update's, not by a pass of their own.
func (o *SGD) StepClear(p, g []float32) (finite bool) {
	return sgdStep(p, g[:len(p)], o.Buf[:len(p)], o.LR, o.Momentum, o.WeightDecay, true)
}

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
func sgdGo(p, g, buf []float32, lr, momentum, weightDecay float32) (finite bool) {
	g, buf = g[:len(p)], buf[:len(p)]
	var carry uint32
	for i := range p {
		d := g[i] + weightDecay*p[i]
		b := momentum*buf[i] + d
		buf[i] = b
		q := p[i] - lr*b
		p[i] = q
		carry |= math.Float32bits(q)&expBits + 1<<23
	}
	return carry&signBit == 0
}

// The exponent and sign bits of a float32.
const expBits, signBit = 0x7f800000, 0x80000000
