package job

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/batchkit/batchkit/trainer/gemm"
)

func ompThreads(v string) func(string) string {
	return func(k string) string {
		if k == "OMP_NUM_THREADS" {
			return v
		}
		return ""
	}
}

// TestSetupGemm: --blas and the pinning's thread count reach the trainer's
// GEMM, and the run's line says which and why; a library this binary lacks
// is the user's to fix (exit 2), naming the build that has it.
func TestSetupGemm(t *testing.T) {
	built := map[string]bool{}
	for _, l := range gemm.Built() {
		built[l.Name] = true
	}
	for _, name := range []string{gemm.OpenBLAS, gemm.MKL} {
		t.Run(name, func(t *testing.T) {
			c := Defaults
			c.BLAS, c.Getenv = name, ompThreads("1")
			s, err := c.Setup()
			if !built[name] {
				want := fmt.Sprintf("invalid --blas %s: this batchkit is built without %s (build tag %s: make build-blas BLAS=%s)", name, name, name, name)
				if err == nil || err.Error() != want || !errors.Is(err, ErrInvalid) {
					t.Fatalf("Setup() = %v, want an ErrInvalid %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := s.GemmLine(), "GEMM "+name+", 1 thread(s) (OMP_NUM_THREADS)"; got != want {
				t.Errorf("GemmLine() = %q, want %q", got, want)
			}
		})
	}
	t.Run("gonum on the pinning's count too", func(t *testing.T) {
		c := Defaults
		c.BLAS, c.Getenv = gemm.Gonum, ompThreads("1")
		s, err := c.Setup()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := s.GemmLine(), "GEMM gonum, 1 thread(s) (OMP_NUM_THREADS)"; got != want {
			t.Errorf("GemmLine() = %q, want %q", got, want)
		}
	})
	t.Run("auto: the library built in, the rank's CPUs", func(t *testing.T) {
		c := Defaults
		c.Getenv = ompThreads("")
		s, err := c.Setup()
		if err != nil {
			t.Fatal(err)
		}
		if g := s.Train.Gemm; g.Name() != gemm.Built()[0].Name || g.Threads() != runtime.GOMAXPROCS(0) {
			t.Errorf("auto opened %s on %d threads, want %s on %d", g.Name(), g.Threads(), gemm.Built()[0].Name, runtime.GOMAXPROCS(0))
		}
	})
}
