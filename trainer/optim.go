package trainer

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

// Step updates p in place from the gradient g.
func (o *SGD) Step(p, g []float32) {
	g, buf := g[:len(p)], o.Buf[:len(p)]
	for i := range p {
		d := g[i] + o.WeightDecay*p[i]
		buf[i] = o.Momentum*buf[i] + d
		p[i] -= o.LR * buf[i]
	}
}
