package collective

import (
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"math"
	"unsafe"
)

// The generic fallbacks: every optional operation built on Allreduce(Sum).
// Filler elements are negative zero, the identity of IEEE addition
// (x + -0 == x bit for bit, also for x = +0, -0, ±Inf and NaN), so the
// copied values arrive unchanged.

// broadcastViaAllreduce: non-roots contribute -0, root its data.
func (c *Comm) broadcastViaAllreduce(buf backend.Buffer, root int) error {
	if c.b.Rank() != root {
		fillNegZero(buf)
	}
	return c.b.Allreduce(buf, buf, Sum)
}

// allgatherViaAllreduce: each rank writes its block at its offset in a
// buffer of -0 and the sum assembles the whole.
func (c *Comm) allgatherViaAllreduce(send, recv backend.Buffer) error {
	k := send.Len
	fillNegZero(recv)
	copy(recv.Slice(c.b.Rank()*k, (c.b.Rank()+1)*k).Bytes(), send.Bytes())
	return c.b.Allreduce(recv, recv, Sum)
}

// reduceScatterViaAllreduce: reduce everything, keep our block.
func (c *Comm) reduceScatterViaAllreduce(send, recv backend.Buffer, op Op) error {
	tmp := c.scratchBuffer(send.Len, send.Type)
	if err := c.b.Allreduce(send, tmp, op); err != nil {
		return err
	}
	k := recv.Len
	copy(recv.Bytes(), tmp.Slice(c.b.Rank()*k, (c.b.Rank()+1)*k).Bytes())
	return nil
}

// barrierViaAllreduce: nobody can finish an allreduce before everyone
// has contributed.
func (c *Comm) barrierViaAllreduce() error {
	one := c.scratchBuffer(1, Float64)
	one.Float64s()[0] = 1
	return c.b.Allreduce(one, one, Sum)
}

// scratchBuffer returns n elements of reusable memory, grown on demand.
// float64-aligned because it backs both element types.
func (c *Comm) scratchBuffer(n int, t DType) backend.Buffer {
	need := n * t.Size()
	if cap(c.scratch) < need {
		words := make([]float64, (need+7)/8)
		c.scratch = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)
	}
	return backend.Buffer{Ptr: unsafe.Pointer(unsafe.SliceData(c.scratch)), Len: n, Type: t}
}

func fillNegZero(b backend.Buffer) {
	switch b.Type {
	case Float32:
		nz := math.Float32frombits(1 << 31)
		for i, s := 0, b.Float32s(); i < len(s); i++ {
			s[i] = nz
		}
	case Float64:
		nz := math.Copysign(0, -1)
		for i, s := 0, b.Float64s(); i < len(s); i++ {
			s[i] = nz
		}
	}
}
