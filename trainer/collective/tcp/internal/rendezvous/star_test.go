package rendezvous

import (
	"errors"
	"fmt"
	"github.com/batchkit/batchkit/trainer/collective/tcp/internal/tcptest"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// starWorld joins n ranks of a star in this process; step fails on the
// ranks in failing.
func starWorld(t *testing.T, n int, failing map[int]bool) ([]*Star, []error, [][]byte) {
	t.Helper()
	port := tcptest.FreePort(t)
	stars, errs, got := make([]*Star, n), make([]error, n), make([][]byte, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := Options{Rank: r, Size: n, MasterAddr: "127.0.0.1", MasterPort: port, Token: "star-token",
				RendezvousTimeout: 10 * time.Second, NoMasterAddrCheck: true}
			stars[r], errs[r] = JoinStar(o, "test", func() ([]byte, error) { return []byte("kvs at rank 0"), nil },
				func(p []byte) error {
					got[r] = p
					if failing[r] {
						return fmt.Errorf("no communicator for rank %d", r)
					}
					return nil
				})
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, s := range stars {
			if s != nil {
				s.Close()
			}
		}
	})
	return stars, errs, got
}

// TestStar: every rank gets rank 0's payload; a rank whose step fails
// fails every rank, naming it; a rank that dies is named to every other
// rank by the watchdog, and one that closes says goodbye first.
func TestStar(t *testing.T) {
	t.Run("payload", func(t *testing.T) {
		_, errs, got := starWorld(t, 3, nil)
		for r := range 3 {
			if errs[r] != nil || string(got[r]) != "kvs at rank 0" {
				t.Errorf("rank %d: %q, %v", r, got[r], errs[r])
			}
		}
	})
	t.Run("a failing step fails every rank", func(t *testing.T) {
		_, errs, _ := starWorld(t, 3, map[int]bool{2: true})
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "rank 2: no communicator for rank 2") {
				t.Errorf("rank %d: %v, want rank 2's failure", r, err)
			}
		}
	})
	t.Run("watchdog", func(t *testing.T) {
		stars, errs, _ := starWorld(t, 4, nil)
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		lost := make([]chan *LostError, 4)
		for r, s := range stars {
			lost[r] = make(chan *LostError, 1)
			s.Watch(func(e *LostError) { lost[r] <- e })
		}
		stars[3].Close() // a goodbye: no loss
		time.Sleep(100 * time.Millisecond)
		for _, c := range stars[2].conns { // rank 2 dies: no goodbye
			if c != nil {
				c.Close()
			}
		}
		for _, r := range []int{0, 1} {
			select {
			case e := <-lost[r]:
				if e.Rank != 2 || !strings.Contains(e.Error(), "rank 2") || !strings.Contains(e.Error(), "died or was killed") {
					t.Errorf("rank %d: lost %v, want rank 2", r, e)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("rank %d never heard of rank 2's death", r)
			}
		}
		if err := stars[1].Lost(); err == nil {
			t.Error("Lost() is nil after the loss")
		}
	})
	t.Run("ranks with another backend are named", func(t *testing.T) {
		port := tcptest.FreePort(t)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			// Rank 0 runs the TCP backend's own rendezvous, as its New does.
			o, err := Options{Rank: 0, Size: 2, MasterAddr: "127.0.0.1", MasterPort: port, Token: "t",
				RendezvousTimeout: 5 * time.Second, NoMasterAddrCheck: true}.WithDefaults()
			if err == nil {
				var conns []*net.TCPConn
				conns, err = Connect(&o)
				for _, c := range conns {
					if c != nil {
						c.Close()
					}
				}
			}
			errs[0] = err
		}()
		go func() {
			defer wg.Done()
			s, err := JoinStar(Options{Rank: 1, Size: 2, MasterAddr: "127.0.0.1", MasterPort: port, Token: "t",
				RendezvousTimeout: 5 * time.Second}, "ccl", nil, func([]byte) error { return nil })
			if s != nil {
				s.Close()
			}
			errs[1] = err
		}()
		wg.Wait()
		want := "rank 1 uses the ccl backend, rank 0 the tcp backend: every rank must be given the same --backend"
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("rank %d: %v, want %q", r, err, want)
			}
		}
	})
}
