package gemm

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/gonum/blas"
)

func TestThreads(t *testing.T) {
	tests := []struct {
		name     string
		omp      string
		cpus     int
		want     int
		wantFrom string
		wantErr  string
	}{
		{"unset: the rank's CPUs", "", 4, 4, "the rank's CPUs", ""},
		{"unset, no CPU count: one", "", 0, 1, "the rank's CPUs", ""},
		{"set by the pinning", "2", 8, 2, "OMP_NUM_THREADS", ""},
		{"nested levels: the first", "3,2", 8, 3, "OMP_NUM_THREADS", ""},
		{"more than the CPUs: the user's word", "8", 2, 8, "OMP_NUM_THREADS", ""},
		{"zero", "0", 4, 0, "", `OMP_NUM_THREADS="0" is not a thread count: want a positive integer`},
		{"not a number", "many", 4, 0, "", `OMP_NUM_THREADS="many" is not a thread count: want a positive integer`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "OMP_NUM_THREADS" {
					return tc.omp
				}
				return ""
			}
			n, from, err := Threads(getenv, tc.cpus)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || n != tc.want || from != tc.wantFrom {
				t.Fatalf("Threads = %d, %q, %v; want %d, %q", n, from, err, tc.want, tc.wantFrom)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open("atlas", 1); err == nil || err.Error() != `unknown BLAS "atlas": want one of auto, mkl, openblas, gonum` {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := Open(Gonum, 0); err == nil {
		t.Error("0 threads: no error")
	}
	for _, l := range libraries {
		_, err := Open(l.name, 1)
		if l.built != (err == nil) {
			t.Errorf("Open(%s): built %v, err %v", l.name, l.built, err)
		}
		if !l.built && !errors.Is(err, ErrNotBuilt) {
			t.Errorf("Open(%s) not built: %v is not ErrNotBuilt", l.name, err)
		}
	}
}

// TestAuto: auto is the cgo library when one is built in, else gonum.
func TestAuto(t *testing.T) {
	g, err := Open(Auto, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := Gonum
	switch {
	case mklBuilt:
		want = MKL
	case openblasBuilt:
		want = OpenBLAS
	}
	if g.Name() != want {
		t.Errorf("auto is %s, want %s", g.Name(), want)
	}
	if b := Built(); b[len(b)-1].Name != Gonum || b[0].Name != want {
		t.Errorf("Built() = %v: want %s first, gonum last", b, want)
	}
}

// TestThreadsApplied: a cgo library runs the count it was opened with, as
// the library itself reports it (Open fails otherwise); gonum as many
// goroutines as GOMAXPROCS lets run at once.
func TestThreadsApplied(t *testing.T) {
	for _, l := range builtLibraries(t) {
		for _, n := range []int{1, 2, 3} {
			g, err := Open(l, n)
			if err != nil {
				t.Fatalf("%s, %d threads: %v", l, n, err)
			}
			want := n
			if l == Gonum { // goroutines: no more at once than GOMAXPROCS
				want = min(n, runtime.GOMAXPROCS(0))
			}
			if g.Threads() != want {
				t.Errorf("%s: Threads() = %d, want %d", l, g.Threads(), want)
			}
		}
	}
}

func builtLibraries(t *testing.T) []string {
	var names []string
	for _, l := range Built() {
		names = append(names, l.Name)
	}
	t.Logf("libraries built in: %v", names)
	return names
}

// refGemm is the definition, in float64.
func refGemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	at := func(i, l int) float32 {
		if tA == blas.Trans {
			return a[l*lda+i]
		}
		return a[i*lda+l]
	}
	bt := func(l, j int) float32 {
		if tB == blas.Trans {
			return b[j*ldb+l]
		}
		return b[l*ldb+j]
	}
	out := make([]float64, len(c))
	for i := range c {
		out[i] = float64(c[i])
	}
	for i := range m {
		for j := range n {
			var s float64
			for l := range k {
				s += float64(at(i, l)) * float64(bt(l, j))
			}
			out[i*ldc+j] = float64(alpha)*s + float64(beta)*float64(c[i*ldc+j])
		}
	}
	return out
}

// TestSgemm: every library built in, every transpose, odd sizes and
// leading dimensions wider than the rows, against the float64 definition.
func TestSgemm(t *testing.T) {
	const m, n, k, pad = 37, 29, 53, 3
	fill := func(size int, f func(float64) float64) []float32 {
		s := make([]float32, size)
		for i := range s {
			s[i] = float32(f(float64(i)))
		}
		return s
	}
	for _, l := range builtLibraries(t) {
		g, err := Open(l, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				ar, ac, br, bc := m, k, k, n
				if tA == blas.Trans {
					ar, ac = k, m
				}
				if tB == blas.Trans {
					br, bc = n, k
				}
				a, b := fill(ar*(ac+pad), math.Sin), fill(br*(bc+pad), math.Cos)
				c := fill(m*(n+pad), func(x float64) float64 { return math.Sin(x / 7) })
				want := refGemm(tA, tB, m, n, k, 0.5, a, ac+pad, b, bc+pad, 2, c, n+pad)
				g.Sgemm(tA, tB, m, n, k, 0.5, a, ac+pad, b, bc+pad, 2, c, n+pad)
				for i := range c {
					if d := math.Abs(float64(c[i]) - want[i]); d > 1e-4*(1+math.Abs(want[i])) {
						t.Fatalf("%s %c%c: element %d is %g, want %g", l, tA, tB, i, c[i], want[i])
					}
				}
			}
		}
	}
}

func TestSgemmArgErrors(t *testing.T) {
	for _, l := range builtLibraries(t) {
		g, err := Open(l, 1)
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			call func()
			want string
		}{
			{"short A", func() {
				g.Sgemm(blas.NoTrans, blas.NoTrans, 2, 2, 2, 1, make([]float32, 3), 2, make([]float32, 4), 2, 0, make([]float32, 4), 2)
			},
				"gemm: A: 3 elements for 2×2 (ld 2)"},
			{"ld below the columns", func() {
				g.Sgemm(blas.NoTrans, blas.Trans, 2, 2, 2, 1, make([]float32, 4), 2, make([]float32, 4), 1, 0, make([]float32, 4), 2)
			},
				"gemm: B: leading dimension 1 < 2 columns"},
			{"negative", func() { g.Sgemm(blas.NoTrans, blas.NoTrans, -1, 2, 2, 1, nil, 2, nil, 2, 0, nil, 2) },
				"gemm: negative dimension m=-1 n=2 k=2"},
		}
		for _, tc := range tests {
			t.Run(l+"/"+tc.name, func(t *testing.T) {
				defer func() {
					var ae *ArgError
					r := recover()
					err, _ := r.(error)
					if !errors.As(err, &ae) {
						t.Fatalf("panic %v, want an *ArgError", r)
					}
					if diff := cmp.Diff(tc.want, ae.Error()); diff != "" {
						t.Error(diff)
					}
				}()
				tc.call()
			})
		}
	}
}

// TestGonumThreadsBitIdentical: gonum bounded to fewer threads than
// GOMAXPROCS gives gonum's own result bit for bit, for the model's
// products (every transpose, edges that are not whole blocks, beta 0, 1
// and other), so a rank's thread count never changes its weights.
func TestGonumThreadsBitIdentical(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	fill := func(size int, f func(float64) float64) []float32 {
		s := make([]float32, size)
		for i := range s {
			s[i] = float32(f(float64(i) / 3))
		}
		return s
	}
	for _, threads := range []int{1, 2, 3} {
		g, err := Open(Gonum, threads)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct{ m, n, k int }{{64, 256, 256}, {256, 256, 64}, {130, 200, 77}, {64, 10, 300}} {
			for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
					for _, beta := range []float32{0, 1, 0.5} {
						ar, ac, br, bc := s.m, s.k, s.k, s.n
						if tA == blas.Trans {
							ar, ac = s.k, s.m
						}
						if tB == blas.Trans {
							br, bc = s.n, s.k
						}
						a, b := fill(ar*ac, math.Sin), fill(br*bc, math.Cos)
						c := fill(s.m*s.n, math.Sin)
						want := slices.Clone(c)
						Default().Sgemm(tA, tB, s.m, s.n, s.k, 0.75, a, ac, b, bc, beta, want, s.n)
						g.Sgemm(tA, tB, s.m, s.n, s.k, 0.75, a, ac, b, bc, beta, c, s.n)
						if !slices.Equal(c, want) {
							t.Fatalf("%d threads, %v %c%c beta %g: differs from gonum's own", threads, s, tA, tB, beta)
						}
					}
				}
			}
		}
		if got := g.Threads(); got != threads {
			t.Errorf("Threads() = %d, want %d", got, threads)
		}
	}
}
