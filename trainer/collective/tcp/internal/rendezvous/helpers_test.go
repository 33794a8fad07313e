package rendezvous

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchkit/batchkit/internal/freeport"
)

const tcpTestToken = "job-token-for-tests"

// tcpLog collects a rank's Logf lines.
type tcpLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *tcpLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *tcpLog) grep(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.Contains(s, substr) {
			out = append(out, s)
		}
	}
	return out
}

// tcpFreePort returns a free port for an in-process world's rank 0.
func tcpFreePort(t testing.TB) int {
	t.Helper()
	port, err := freeport.BelowEphemeral("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func tcpTestOptions(rank, size, port int) Options {
	return Options{Rank: rank, Size: size, MasterAddr: "127.0.0.1", MasterPort: port, Token: tcpTestToken,
		Timeout: time.Minute, RendezvousTimeout: 20 * time.Second}
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
	conns, errs := connectRanks(size, tcpFreePort(t), ranks, tweak)
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
