package job

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/topology"
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

// cpuShare is what this rank has of the node's CPUs: its mask, or its
// share of it when the mask is the whole node and several local ranks have
// it (nothing bound them: batchkit run without exec --pin), as envsetup's
// pinning divides a shared mask. n is 0 when the mask cannot be read.
type cpuShare struct {
	n, online int
	shared    bool // n is a share of the whole node's mask
}

// readShare reads this rank's cpuShare (s.readCPUs, else the process's
// mask).
func (s *Setup) readShare(topo topology.Topology) cpuShare {
	read := s.readCPUs
	if read == nil {
		read = func() (envsetup.CPUSet, error) { return envsetup.ReadCPUs("/") }
	}
	cpus, err := read()
	if err != nil || len(cpus.Allowed) == 0 {
		return cpuShare{}
	}
	sh := cpuShare{n: len(cpus.Allowed), online: cpus.Online}
	if sh.n >= cpus.Online && topo.LocalWorldSize > 1 {
		sh.n, sh.shared = max(1, sh.n/topo.LocalWorldSize), true
	}
	return sh
}

// shareNode gives an unpinned rank's BLAS its share of the node (s.share)
// when the thread count came from the rank's CPUs; otherwise every
// unpinned rank would run a thread per CPU of the node. A mask narrower
// than the node is the rank's own, and an unreadable one keeps the count.
func (s *Setup) shareNode(topo topology.Topology) error {
	sh := s.share
	if s.gemmThreadsFrom != gemm.FromCPUs || !sh.shared || sh.n >= s.Train.Gemm.Threads() {
		return nil
	}
	g, err := gemm.Open(s.Train.Gemm.Name(), sh.n)
	if err != nil {
		return err
	}
	s.Train.Gemm = g
	s.gemmThreadsFrom = fmt.Sprintf("the node's %d CPUs / %d local ranks", sh.online, topo.LocalWorldSize)
	return nil
}

// GemmLine says which GEMM the run multiplies with and on how many
// threads, and where that count came from.
func (s *Setup) GemmLine() string {
	g := s.Train.Gemm
	return fmt.Sprintf("GEMM %s, %d thread(s) (%s)", g.Name(), g.Threads(), s.gemmThreadsFrom)
}
