package job

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/batchkit/batchkit/trainer/gemm"
)

// openGemm opens --blas with the rank's thread count (gemm.Threads: the
// pinning's OMP_NUM_THREADS, else the CPUs GOMAXPROCS says the rank has).
// A name this binary lacks, or a bad OMP_NUM_THREADS, is the user's to fix.
func openGemm(name string, getenv func(string) string) (gemm.Impl, string, error) {
	if !slices.Contains(gemm.Names(), name) {
		return nil, "", invalid("invalid --blas %q: want one of %s", name, strings.Join(gemm.Names(), ", "))
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	threads, from, err := gemm.Threads(getenv, runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, "", invalid("%v", err)
	}
	g, err := gemm.Open(name, threads)
	if errors.Is(err, gemm.ErrNotBuilt) {
		return nil, "", invalid("invalid --blas %s: %v", name, err)
	}
	if err != nil {
		return nil, "", err
	}
	return g, from, nil
}

// GemmLine says which GEMM the run multiplies with and on how many
// threads, and where that count came from.
func (s *Setup) GemmLine() string {
	g := s.Train.Gemm
	return fmt.Sprintf("GEMM %s, %d thread(s) (%s)", g.Name(), g.Threads(), s.gemmThreadsFrom)
}
