package collective

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/internal/freeport"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/tcp"
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
	kind := Auto
	if b := os.Getenv("BATCHKIT_TEST_BACKEND"); b != "" {
		if kind, err = ParseKind(b); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Topology: topo, Backend: kind, Getenv: os.Getenv, Logf: t.Logf}
	c, err := Init(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Backend(); got != want {
		t.Fatalf("backend %q, want %q", got, want)
	}
	// Init is idempotent: the same communicator, the world not doubled.
	again, err := Init(cfg)
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
	if tb, ok := c.b.(interface{ SharedMemory(rank int) bool }); ok && c.Size() > 1 {
		wantShm := os.Getenv("BATCHKIT_TCP_SHM") != "0"
		n := c.Size()
		for _, r := range []int{(c.Rank() + 1) % n, (c.Rank() + n - 1) % n} {
			if got := tb.SharedMemory(r); got != wantShm {
				t.Fatalf("link to rank %d: shared memory %v, want %v", r, got, wantShm)
			}
		}
	}
	for _, fallback := range []bool{false, true} {
		c.fallback = fallback // the same world through the Allreduce-based fallbacks
		for _, err := range runConformance(c) {
			t.Error(err)
		}
		if t.Failed() {
			break
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Barrier(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Barrier after Close: %v, want ErrClosed", err)
	}
	if want == "mpi" {
		if _, err := Init(cfg); err == nil || !strings.Contains(err.Error(), "finalised") {
			t.Fatalf("Init after MPI was finalised: %v, want an error", err)
		}
	}
}

// TestSelfWorld: a world of one needs no network and no token.
func TestSelfWorld(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		c, err := Init(Config{Topology: topology.Topology{Launcher: topology.Single, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1}, Fallback: fallback})
		if err != nil {
			t.Fatal(err)
		}
		if c.Backend() != "self" {
			t.Fatalf("backend %q, want self", c.Backend())
		}
		for _, err := range runConformance(c) {
			t.Error(err)
		}
		c.Close()
	}
}

// TestConformanceTCPInProcess runs the whole suite on in-process TCP worlds
// (goroutines as ranks, real loopback sockets), natively and through the
// fallbacks, with the links between neighbours in shared memory (the
// default on one host) and with every link on TCP (as between hosts). Real
// multi-process worlds run it in integration/.
func TestConformanceTCPInProcess(t *testing.T) {
	sizes := []int{2, 3, 4}
	if testing.Short() {
		sizes = []int{3}
	}
	for _, noShm := range []bool{false, true} {
		transport := map[bool]string{false: "shm", true: "tcp"}[noShm]
		for _, n := range sizes {
			for _, fallback := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%d ranks fallback %v", transport, n, fallback), func(t *testing.T) {
					bs := tcpWorld(t, n, noShm)
					errs := make([][]error, n)
					var wg sync.WaitGroup
					for r, b := range bs {
						wg.Add(1)
						go func() {
							defer wg.Done()
							errs[r] = runConformance(newComm(b, r, fallback))
						}()
					}
					wg.Wait()
					for _, es := range errs {
						for _, err := range es {
							t.Error(err)
						}
					}
				})
			}
		}
	}
}

// tcpWorld forms a world of size TCP ranks in this process.
func tcpWorld(t *testing.T, size int, noShm bool) []backend.Backend {
	t.Helper()
	port, err := freeport.BelowEphemeral("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	bs, errs := make([]backend.Backend, size), make([]error, size)
	var wg sync.WaitGroup
	for r := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bs[r], errs[r] = tcp.New(tcp.Options{Rank: r, Size: size, MasterAddr: "127.0.0.1", MasterPort: port,
				Token: "job-token-for-tests", Timeout: time.Minute, RendezvousTimeout: 20 * time.Second, NoShm: noShm})
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, b := range bs {
			if b != nil {
				b.Close()
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return bs
}
