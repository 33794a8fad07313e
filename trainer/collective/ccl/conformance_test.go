//go:build ccl

package ccl_test

import (
	"os"
	"testing"
	"time"

	"github.com/batchkit/batchkit/internal/freeport"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/ccl"
	"github.com/batchkit/batchkit/trainer/collective/internal/conform"
	"github.com/batchkit/batchkit/trainer/collective/tcp"
)

// TestConformance runs the shared conformance suite on a oneCCL world of
// one in this process (oneCCL is initialised once per process, so larger
// worlds are one process a rank: the integration tests run collective's
// TestWorld with BATCHKIT_TEST_BACKEND=ccl under batchkit run, mpiexec,
// mpirun and srun).
func TestConformance(t *testing.T) {
	conform.Run(t, []int{1}, func(t *testing.T, size int) []backend.Backend {
		port, err := freeport.BelowEphemeral("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		topo := topology.Topology{Launcher: topology.Single, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1}
		b, err := ccl.New(ccl.Options{Topology: topo, Getenv: os.Getenv, Rendezvous: tcp.Options{
			Rank: 0, Size: 1, MasterAddr: "127.0.0.1", MasterPort: port, Token: "job-token-for-tests",
			Timeout: time.Minute, RendezvousTimeout: 20 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return []backend.Backend{b}
	})
}
