package trainer

import (
	"fmt"
	"testing"
)

// streamSizes are BenchmarkStream's and BenchmarkSGDUpdate's array lengths:
// far beyond the caches (64 MiB an array against a 32 MiB L3: the DRAM
// figure) and the compute-bound model's parameter vector (4.5 MB: the
// regime of the SGD update, whose three vectors fit in the L3).
func streamSizes(b *testing.B) []struct {
	name string
	n    int
} {
	m, err := NewMLP(64, []int{1024, 1024}, 10)
	if err != nil {
		b.Fatal(err)
	}
	return []struct {
		name string
		n    int
	}{{"dram", 16 << 20}, {"params", m.NumParams()}}
}

// BenchmarkStream is the machine's memory bandwidth as STREAM measures it
// (copy c=a, scale b=q·c, triad a=b+q·c; GB/s counts the bytes the kernel
// reads and writes, not the write-allocate reads). copy is Go's memmove
// (vector loads and stores: the bandwidth itself); scale and triad are Go
// loops like the step's own non-GEMM passes, scalar, which at the L3's
// speed measure the loop, not the memory. The roofline of the step in
// docs/performance.md divides each pass's bytes by these.
func BenchmarkStream(b *testing.B) {
	for _, size := range streamSizes(b) {
		x, y, z := make([]float32, size.n), make([]float32, size.n), make([]float32, size.n)
		for i := range x {
			x[i], y[i], z[i] = 1, 2, 0
		}
		const q = 3
		for _, k := range []struct {
			name   string
			arrays int
			run    func()
		}{
			{"copy", 2, func() { copy(z, x) }},
			{"scale", 2, func() {
				z := z[:len(y)]
				for i := range y {
					y[i] = q * z[i]
				}
			}},
			{"triad", 3, func() {
				y, z := y[:len(x)], z[:len(x)]
				for i := range x {
					x[i] = y[i] + q*z[i]
				}
			}},
		} {
			b.Run(fmt.Sprintf("%s/%s", size.name, k.name), func(b *testing.B) {
				for b.Loop() {
					k.run()
				}
				b.ReportMetric(float64(4*k.arrays*size.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkSGDUpdate is the update alone (the C loop in a cgo build: a
// vectorised STREAM of five arrays) at streamSizes: 20 bytes a parameter
// (p, g, buf read; p, buf written), as GB/s to hold against BenchmarkStream.
func BenchmarkSGDUpdate(b *testing.B) {
	for _, size := range streamSizes(b) {
		n := size.n
		p, g := make([]float32, n), make([]float32, n)
		for i := range p {
			p[i], g[i] = 1e-3*float32(i%1000), 1e-6*float32(i%777)
		}
		opt := NewSGD(n, 0.01, 0.9, 1e-4)
		b.Run(size.name, func(b *testing.B) {
			for b.Loop() {
				opt.Step(p, g)
			}
			b.ReportMetric(float64(20*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
