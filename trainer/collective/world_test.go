package collective_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective"
	"github.com/batchkit/batchkit/trainer/collective/internal/conform"
)

// TestWorld runs the conformance suite as one rank of a real world: the
// integration tests start this test binary under batchkit run, mpirun and
// srun with BATCHKIT_TEST_WORLD set to the backend Auto (or
// $BATCHKIT_TEST_BACKEND) must pick there.
func TestWorld(t *testing.T) {
	want := os.Getenv("BATCHKIT_TEST_WORLD")
	if want == "" {
		t.Skip("BATCHKIT_TEST_WORLD is unset: run under a launcher (see integration/collective_test.go)")
	}
	topo, err := detect.Detect(os.Getenv, detect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kind := collective.Auto
	if b := os.Getenv("BATCHKIT_TEST_BACKEND"); b != "" {
		if kind, err = collective.ParseKind(b); err != nil {
			t.Fatal(err)
		}
	}
	cfg := collective.Config{Topology: topo, Backend: kind, Getenv: os.Getenv, Logf: t.Logf}
	c, err := collective.Init(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Backend(); got != want {
		t.Fatalf("backend %q, want %q", got, want)
	}
	// Init is idempotent: the same communicator, the world not doubled.
	again, err := collective.Init(cfg)
	if err != nil || again != c || again.Size() != topo.WorldSize {
		t.Fatalf("second Init = %p (size %d), %v; want the first communicator %p", again, again.Size(), err, c)
	}
	if c.Rank() != topo.Rank || c.Size() != topo.WorldSize || c.LocalRank() != topo.LocalRank {
		t.Fatalf("communicator says rank %d/%d local %d, launcher says %d/%d local %d",
			c.Rank(), c.Size(), c.LocalRank(), topo.Rank, topo.WorldSize, topo.LocalRank)
	}
	// On one host the TCP backend's neighbour links are shared memory
	// unless BATCHKIT_TCP_SHM=0 (the launchers here all start their ranks
	// on this machine, the local cluster's two nodes included).
	// Only ring neighbours (ranks r±1) get shared memory (tcp/shm.go).
	if tb, ok := collective.BackendOf(c).(interface{ SharedMemory(rank int) bool }); ok && c.Size() > 1 {
		wantShm := os.Getenv("BATCHKIT_TCP_SHM") != "0"
		n := c.Size()
		for _, r := range []int{(c.Rank() + 1) % n, (c.Rank() + n - 1) % n} {
			if got := tb.SharedMemory(r); got != wantShm {
				t.Fatalf("link to rank %d: shared memory %v, want %v", r, got, wantShm)
			}
		}
	}
	conform.World(t, c) // natively, then the same world through the Allreduce-based fallbacks
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Barrier(); !errors.Is(err, collective.ErrClosed) {
		t.Fatalf("Barrier after Close: %v, want ErrClosed", err)
	}
	if want == "mpi" {
		if _, err := collective.Init(cfg); err == nil || !strings.Contains(err.Error(), "finalised") {
			t.Fatalf("Init after MPI was finalised: %v, want an error", err)
		}
	}
}

// TestSelfWorld: a world of one needs no network and no token.
func TestSelfWorld(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		c, err := collective.Init(collective.Config{Topology: topology.Topology{Launcher: topology.Single, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1}, Fallback: fallback})
		if err != nil {
			t.Fatal(err)
		}
		if c.Backend() != "self" {
			t.Fatalf("backend %q, want self", c.Backend())
		}
		for _, err := range conform.Check(c) {
			t.Error(err)
		}
		c.Close()
	}
}

// IdleWait is the backends table's: every backend's AllreduceIdle waits
// without a CPU (tcp's every call does), self has no peers to wait for.
func TestIdleWait(t *testing.T) {
	got := map[string]bool{}
	for _, name := range []string{"tcp", "mpi", "ccl", "self", "nccl"} {
		got[name] = collective.IdleWait(name)
	}
	want := map[string]bool{"tcp": true, "mpi": true, "ccl": true, "self": false, "nccl": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("IdleWait (-want +got):\n%s", diff)
	}
}
