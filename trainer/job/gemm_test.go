package job

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/topology"
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

// TestShareNode: ranks whose mask is the whole node (nothing pinned them)
// divide its CPUs among the node's local ranks; a rank with a mask of its
// own, a world of one per node or an OMP_NUM_THREADS keep their count.
func TestShareNode(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	node := func(allowed, online int) func() (envsetup.CPUSet, error) {
		return func() (envsetup.CPUSet, error) {
			set := envsetup.CPUSet{Online: online}
			for id := range allowed {
				set.Allowed = append(set.Allowed, envsetup.CPU{ID: id, Core: id})
			}
			return set, nil
		}
	}
	for _, tc := range []struct {
		name  string
		omp   string
		local int
		cpus  func() (envsetup.CPUSet, error)
		want  string
	}{
		{"unpinned, 2 ranks on 4 CPUs", "", 2, node(4, 4), "GEMM gonum, 2 thread(s) (the node's 4 CPUs / 2 local ranks)"},
		{"more ranks than CPUs: one each", "", 8, node(4, 4), "GEMM gonum, 1 thread(s) (the node's 4 CPUs / 8 local ranks)"},
		{"a mask of its own", "", 2, node(2, 8), "GEMM gonum, 4 thread(s) (the rank's CPUs)"},
		{"alone on the node", "", 1, node(4, 4), "GEMM gonum, 4 thread(s) (the rank's CPUs)"},
		{"OMP_NUM_THREADS wins", "3", 2, node(4, 4), "GEMM gonum, 3 thread(s) (OMP_NUM_THREADS)"},
		{"mask unreadable", "", 2, func() (envsetup.CPUSet, error) { return envsetup.CPUSet{}, errors.New("no /proc") },
			"GEMM gonum, 4 thread(s) (the rank's CPUs)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults
			c.BLAS, c.Getenv = gemm.Gonum, ompThreads(tc.omp)
			s, err := c.Setup()
			if err != nil {
				t.Fatal(err)
			}
			s.readCPUs = tc.cpus
			if err := s.Check(topology.Topology{Rank: 1, WorldSize: tc.local, LocalRank: 1, LocalWorldSize: tc.local}, io.Discard, io.Discard); err != nil {
				t.Fatal(err)
			}
			if got := s.GemmLine(); got != tc.want {
				t.Errorf("GemmLine() = %q, want %q", got, tc.want)
			}
		})
	}
}
