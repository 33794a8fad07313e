package rendezvous

import (
	"net"
	"sync"
	"testing"

	"github.com/batchkit/batchkit/trainer/collective/tcp/internal/tcptest"
)

func tcpTestOptions(rank, size, port int) Options {
	return Options{Rank: rank, Size: size, MasterAddr: tcptest.MasterAddr, MasterPort: port, Token: tcptest.Token,
		Timeout: tcptest.Timeout, RendezvousTimeout: tcptest.RendezvousTimeout}
}

// connectRanks runs the rendezvous for the given ranks concurrently, as
// package tcp's New does, and returns each rank's connections and error.
func connectRanks(size, port int, ranks []int, tweak func(o *Options)) ([][]*net.TCPConn, []error) {
	conns := make([][]*net.TCPConn, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := tcpTestOptions(r, size, port)
			if tweak != nil {
				tweak(&o)
			}
			o, err := o.WithDefaults()
			if err == nil {
				conns[r], err = Connect(&o)
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	return conns, errs
}

// connectWorld forms the mesh of a world of size ranks in this process and
// closes it when the test ends.
func connectWorld(t testing.TB, size int, tweak func(o *Options)) {
	t.Helper()
	ranks := make([]int, size)
	for i := range ranks {
		ranks[i] = i
	}
	conns, errs := connectRanks(size, tcptest.FreePort(t), ranks, tweak)
	t.Cleanup(func() {
		for _, cs := range conns {
			for _, c := range cs {
				if c != nil {
					c.Close()
				}
			}
		}
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: Connect: %v", r, err)
		}
	}
}
