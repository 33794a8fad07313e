package backend

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var reduceSpecials = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.5, -2.25, math.MaxFloat32, -math.MaxFloat32,
	math.Inf(1), math.Inf(-1), math.NaN(),
	math.Float64frombits(0x7ff8000000000bad), math.Float64frombits(0xfff0000000000001),
}

// TestReduceMatchesMath: every pair of special values, both operand
// orders, both types, bit for bit against math.Max / math.Min and +.
func TestReduceMatchesMath(t *testing.T) {
	ref := map[Op]func(a, b float64) float64{
		Sum: func(a, b float64) float64 { return a + b },
		Max: math.Max,
		Min: math.Min,
	}
	var as, bs []float64
	for _, a := range reduceSpecials {
		for _, b := range reduceSpecials {
			as, bs = append(as, a), append(bs, b)
		}
	}
	for _, op := range []Op{Sum, Max, Min} {
		t.Run(fmt.Sprintf("float64/%v", op), func(t *testing.T) {
			got := make([]float64, len(as))
			Reduce(BufferOf(got), BufferOf(as), BufferOf(bs), op)
			var want, gotBits []uint64
			for i := range as {
				want = append(want, math.Float64bits(ref[op](as[i], bs[i])))
				gotBits = append(gotBits, math.Float64bits(got[i]))
			}
			if op == Sum { // NaN payloads of a sum are the hardware's business
				for i := range want {
					if math.IsNaN(math.Float64frombits(want[i])) && math.IsNaN(got[i]) {
						gotBits[i] = want[i]
					}
				}
			}
			if d := cmp.Diff(want, gotBits); d != "" {
				t.Errorf("bits (-want +got):\n%s", d)
			}
		})
		t.Run(fmt.Sprintf("float32/%v", op), func(t *testing.T) {
			a32, b32 := make([]float32, len(as)), make([]float32, len(as))
			for i := range as {
				a32[i], b32[i] = float32(as[i]), float32(bs[i])
			}
			got := make([]float32, len(as))
			Reduce(BufferOf(got), BufferOf(a32), BufferOf(b32), op)
			var want, gotBits []uint32
			for i := range as {
				w := float32(ref[op](float64(a32[i]), float64(b32[i])))
				if op == Sum {
					w = a32[i] + b32[i]
				}
				want = append(want, math.Float32bits(w))
				gotBits = append(gotBits, math.Float32bits(got[i]))
			}
			if op == Sum {
				for i := range want {
					if w := math.Float32frombits(want[i]); w != w && got[i] != got[i] {
						gotBits[i] = want[i]
					}
				}
			}
			if d := cmp.Diff(want, gotBits); d != "" {
				t.Errorf("bits (-want +got):\n%s", d)
			}
		})
	}
}

// TestReduceAliasing: dst may be either operand; lengths that exercise the
// unrolled loop's tail.
func TestReduceAliasing(t *testing.T) {
	for n := range 11 {
		for _, alias := range []string{"none", "a", "b"} {
			a, b, d := make([]float64, n), make([]float64, n), make([]float64, n)
			for i := range n {
				a[i], b[i] = float64(i), float64(10*i)
			}
			dst := d
			switch alias {
			case "a":
				dst = a
			case "b":
				dst = b
			}
			Reduce(BufferOf(dst), BufferOf(a), BufferOf(b), Sum)
			want := make([]float64, n)
			for i := range n {
				want[i] = float64(11 * i)
			}
			if diff := cmp.Diff(want, dst); diff != "" {
				t.Errorf("n=%d alias=%s (-want +got):\n%s", n, alias, diff)
			}
		}
	}
}

func BenchmarkReduce(b *testing.B) {
	const n = 1 << 20
	for _, op := range []Op{Sum, Max, Min} {
		for _, dt := range []DType{Float32, Float64} {
			b.Run(fmt.Sprintf("%v/%v", dt, op), func(b *testing.B) {
				x, y := benchBuffer(dt, n, 13), benchBuffer(dt, n, 7)
				b.SetBytes(int64(n * dt.Size()))
				for b.Loop() {
					Reduce(x, x, y, op)
				}
			})
		}
	}
}

// benchBuffer is n elements of type t, element i holding i % mod.
func benchBuffer(t DType, n, mod int) Buffer {
	if t == Float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(i % mod)
		}
		return BufferOf(s)
	}
	s := make([]float64, n)
	for i := range s {
		s[i] = float64(i % mod)
	}
	return BufferOf(s)
}
