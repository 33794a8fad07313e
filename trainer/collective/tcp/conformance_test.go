package tcp_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batchkit/batchkit/internal/freeport"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/internal/conform"
	"github.com/batchkit/batchkit/trainer/collective/tcp"
)

// TestConformance runs the shared conformance suite on in-process worlds
// (goroutines as ranks, real loopback sockets), natively and through the
// fallbacks, with the links between neighbours in shared memory (the
// default on one host) and with every link on TCP (as between hosts). Real
// multi-process worlds run it in integration/ (collective's TestWorld).
func TestConformance(t *testing.T) {
	sizes := []int{2, 3, 4}
	if testing.Short() {
		sizes = []int{3}
	}
	t.Run("shm", func(t *testing.T) { conform.Run(t, sizes, world(false)) })
	t.Run("tcp", func(t *testing.T) { conform.Run(t, sizes, world(true)) })
}

// world opens worlds of TCP ranks in this process.
func world(noShm bool) func(t *testing.T, size int) []backend.Backend {
	return func(t *testing.T, size int) []backend.Backend {
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
}
