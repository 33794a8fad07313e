//go:build ccl

package ccl

import (
	"os"
	"testing"
	"time"

	"github.com/batchkit/batchkit/internal/freeport"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/tcp"
)

// WorldOfOne is a one-rank backend in this process, closed with the test
// (oneCCL is initialised once a process: larger worlds are a process a rank).
func WorldOfOne(t *testing.T) backend.Backend {
	port, err := freeport.BelowEphemeral("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	topo := topology.Topology{Launcher: topology.Single, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1}
	be, err := New(Options{Topology: topo, Getenv: os.Getenv, Rendezvous: tcp.Options{
		Rank: 0, Size: 1, MasterAddr: "127.0.0.1", MasterPort: port, Token: "job-token-for-tests",
		Timeout: time.Minute, RendezvousTimeout: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}
