package backend

import (
	"fmt"
	"math"
)

// Reduce sets dst[i] = a[i] op b[i]. dst may be the same memory as a or b;
// otherwise the three are disjoint. a is always the lower ranks' partial:
// callers fix the operand order so that every rank computes the same bits
// (IEEE addition of two NaNs keeps the first operand's payload).
func Reduce(dst, a, b Buffer, op Op) {
	if a.Len != dst.Len || b.Len != dst.Len || a.Type != dst.Type || b.Type != dst.Type {
		panic(fmt.Sprintf("collective: reduce of mismatched buffers %d/%v, %d/%v, %d/%v",
			dst.Len, dst.Type, a.Len, a.Type, b.Len, b.Type))
	}
	if dst.Len == 0 {
		return
	}
	switch dst.Type {
	case Float32:
		reduceSlices(dst.Float32s(), a.Float32s(), b.Float32s(), op)
	case Float64:
		reduceSlices(dst.Float64s(), a.Float64s(), b.Float64s(), op)
	default:
		panic("collective: reduce of " + dst.Type.String())
	}
}

// reduceSlices picks the loop once, outside it.
func reduceSlices[T float32 | float64](d, x, y []T, op Op) {
	switch op {
	case Sum:
		sumLoop(d, x, y)
	case Max:
		maxLoop(d, x, y)
	case Min:
		minLoop(d, x, y)
	default:
		panic("collective: reduce with " + op.String())
	}
}

// The loops are generic over the element type only: float32 and float64
// have different GC shapes, so each gets its own machine code, and the op
// switch stays outside the loop. Unrolled by four with re-sliced windows so
// the compiler drops the bounds checks.

func sumLoop[T float32 | float64](d, x, y []T) {
	x, y = x[:len(d)], y[:len(d)]
	i := 0
	for ; i+4 <= len(d); i += 4 {
		dd, xx, yy := d[i:i+4:i+4], x[i:i+4:i+4], y[i:i+4:i+4]
		dd[0] = xx[0] + yy[0]
		dd[1] = xx[1] + yy[1]
		dd[2] = xx[2] + yy[2]
		dd[3] = xx[3] + yy[3]
	}
	for ; i < len(d); i++ {
		d[i] = x[i] + y[i]
	}
}

func maxLoop[T float32 | float64](d, x, y []T) {
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		a, b := x[i], y[i]
		// The builtin is branch-free and agrees with math.Max except where
		// a NaN is involved (math.Max prefers +Inf, and a fixed NaN).
		m := max(a, b)
		if m != m {
			m = maxSpecial(a, b)
		}
		d[i] = m
	}
}

func minLoop[T float32 | float64](d, x, y []T) {
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		a, b := x[i], y[i]
		m := min(a, b)
		if m != m {
			m = minSpecial(a, b)
		}
		d[i] = m
	}
}

// maxSpecial is math.Max for a, b that are equal or unordered, with the same
// precedence: +Inf beats NaN, NaN beats everything else, +0 beats -0. The NaN
// is math.NaN()'s, whatever the inputs' payloads, so the result does not
// depend on operand order.
func maxSpecial[T float32 | float64](a, b T) T {
	switch {
	case isPosInf(a) || isPosInf(b):
		return T(math.Inf(1))
	case a != a || b != b:
		return T(math.NaN())
	case a == 0 && signbit(a):
		return b
	}
	return a
}

// minSpecial is math.Min's counterpart: -Inf beats NaN, -0 beats +0.
func minSpecial[T float32 | float64](a, b T) T {
	switch {
	case isNegInf(a) || isNegInf(b):
		return T(math.Inf(-1))
	case a != a || b != b:
		return T(math.NaN())
	case a == 0 && signbit(a):
		return a
	}
	return b
}

// Conversion to float64 is exact, infinities included.
func isPosInf[T float32 | float64](x T) bool { return float64(x) > math.MaxFloat64 }
func isNegInf[T float32 | float64](x T) bool { return float64(x) < -math.MaxFloat64 }
func signbit[T float32 | float64](x T) bool  { return math.Signbit(float64(x)) }
