package tcp

import (
	"fmt"
	"math/bits"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/batchkit/batchkit/trainer/collective/backend"
)

func TestMeshPeers(t *testing.T) {
	for _, c := range []struct {
		name string
		r, n int
		want []int
	}{
		{"alone", 0, 1, nil},
		{"two", 1, 2, []int{0}},
		{"four: every rank", 2, 4, []int{0, 1, 3}},
		{"six: rank 0 folds into 1 and is no partner of 3", 0, 6, []int{1, 2, 4, 5}},
		{"six: rank 3", 3, 6, []int{1, 2, 4, 5}},
		{"eight: distances 1, 2, 4", 0, 8, []int{1, 2, 4, 6, 7}},
		{"twelve: rank 0 hands off to 1", 0, 12, []int{1, 2, 4, 8, 10, 11}},
		// Folded with 4; recursive doubling with 7, 1 and 10.
		{"twelve: rank 5", 5, 12, []int{1, 3, 4, 6, 7, 9, 10}},
		{"512: 100 ± 1, 2, 4 … 256", 100, 512,
			[]int{36, 68, 84, 92, 96, 98, 99, 101, 102, 104, 108, 116, 132, 164, 228, 356, 484}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, meshPeers(c.r, c.n), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("meshPeers(%d, %d) (-want +got):\n%s", c.r, c.n, diff)
			}
		})
	}
}

// TestMeshPeersShape: for every world up to 300 ranks and some larger,
// every rank's links are in the world, not itself, sorted, symmetric (the
// rendezvous dials up and accepts down) and at most 3·⌈log2 n⌉.
func TestMeshPeersShape(t *testing.T) {
	sizes := []int{511, 512, 513, 1000, 1023, 1024, 2047, 4097}
	for n := 1; n <= 300; n++ {
		sizes = append(sizes, n)
	}
	for _, n := range sizes {
		links := make([][]int, n)
		for r := range n {
			links[r] = meshPeers(r, n)
		}
		bound := 3 * bits.Len(uint(n-1))
		for r, ps := range links {
			if len(ps) > bound || !slices.IsSorted(ps) || slices.Contains(ps, r) {
				t.Fatalf("world %d: rank %d links to %v: want at most %d other ranks, sorted", n, r, ps, bound)
			}
			for _, p := range ps {
				if p < 0 || p >= n || !slices.Contains(links[p], r) {
					t.Fatalf("world %d: rank %d links to %d, which does not link back (%v)", n, r, p, links[p])
				}
			}
		}
	}
}

func TestRDPlan(t *testing.T) {
	for _, c := range []struct {
		name string
		r, n int
		want rdPlan
	}{
		{"power of two", 2, 4, rdPlan{fold: -1, steps: []rdStep{{3, true}, {0, false}}}},
		{"six: rank 2 hands off to 3", 2, 6, rdPlan{handsOff: true, fold: 3}},
		{"six: rank 3 takes 2's data, then virtual rank 1", 3, 6, rdPlan{fold: 2, steps: []rdStep{{1, false}, {5, true}}}},
		{"six: rank 5 is virtual rank 3", 5, 6, rdPlan{fold: -1, steps: []rdStep{{4, false}, {3, false}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, newRDPlan(c.r, c.n), cmp.AllowUnexported(rdPlan{}, rdStep{})); diff != "" {
				t.Errorf("newRDPlan(%d, %d) (-want +got):\n%s", c.r, c.n, diff)
			}
		})
	}
}

// TestTCPSparseCollectives: worlds where a rank does not link to every
// other, with pairs that fold for recursive doubling (6 = 4 + 2, 12 = 8 +
// 4), and the tiny tuning, so that every algorithm runs at every size and
// every root: each operation exact and the same bits on every rank, over
// links only to meshPeers. (Over TCP only: which links are shared memory
// does not change with the mesh, and rings this small make the shared-
// memory run four times as long.)
func TestTCPSparseCollectives(t *testing.T) {
	sizes := []int{6, 12}
	if testing.Short() {
		sizes = []int{6}
	}
	for _, n := range sizes {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			defer tcpTune(1<<10, 1<<10, 16<<10)()
			tcpCollectives(t, n, func(o *Options) { o.NoShm = true })
		})
	}
}

// TestTCPLinksPerRank: in a world of 64 ranks (in this process) each rank
// holds a connection only to its meshPeers, 11 at most against a full
// mesh's 63, and rank 0 has closed the rendezvous connections of every
// other rank: the process's open sockets are exactly the links' two ends.
// Every operation is right over those links.
func TestTCPLinksPerRank(t *testing.T) {
	const n = 64
	defer tcpTuneShm(64<<10, 16<<10)() // 64 link files of 8 MiB are not needed here
	before := openSockets()
	bs := tcpWorld(t, n, nil)
	ends := 0
	for r, b := range bs {
		var got []int
		for p, peer := range b.peers {
			if peer != nil {
				got = append(got, p)
			}
		}
		if diff := cmp.Diff(meshPeers(r, n), got); diff != "" {
			t.Errorf("rank %d's links (-want +got):\n%s", r, diff)
		}
		if len(got) > 11 {
			t.Errorf("rank %d has %d links, want at most 11 (every rank linked to every other would be 63)", r, len(got))
		}
		ends += len(got)
	}
	// At most: a socket an earlier test left may have closed meanwhile.
	if got := openSockets() - before; got > ends {
		t.Errorf("%d sockets open, want %d: one per end of each link, no listener, no other connection", got, ends)
	}
	for _, c := range []tcpCase{
		{"allreduce/recursive doubling", func(t *testing.T, bs []*tcpBackend) {
			tcpCheckAllreduce(t, bs, backend.Float32, backend.Sum, 7, false)
		}},
		{"allreduce/ring", func(t *testing.T, bs []*tcpBackend) {
			tcpCheckAllreduce(t, bs, backend.Float64, backend.Sum, 1<<17+3, true)
		}},
		{"broadcast/tree", func(t *testing.T, bs []*tcpBackend) { tcpCheckBroadcast(t, bs, backend.Float32, 1000, 37) }},
		{"broadcast/chain", func(t *testing.T, bs []*tcpBackend) { tcpCheckBroadcast(t, bs, backend.Float32, 1<<17, 63) }},
		{"allgather", func(t *testing.T, bs []*tcpBackend) { tcpCheckAllgather(t, bs, backend.Float32, 3) }},
		{"reducescatter", func(t *testing.T, bs []*tcpBackend) {
			tcpCheckReduceScatter(t, bs, backend.Float32, backend.Max, 5)
		}},
		{"barrier", tcpCheckBarrier},
	} {
		t.Run(c.name, func(t *testing.T) { c.check(t, bs) })
	}
}

// TestTCPSparsePeerCloses: in a world of 16, where a rank links to 7 or 9
// others, one rank closing during a run of allreduces still makes every
// other rank fail within 2 s (the timeout is a minute): each rank that
// fails closes its links, so the failure travels from link to link to
// ranks that had no link to the one that closed.
func TestTCPSparsePeerCloses(t *testing.T) {
	const n, closer = 16, 5
	for _, size := range []int{2, 1 << 20} { // recursive doubling, ring
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			bs := tcpWorld(t, n, nil)
			var closedAt time.Time
			failedAt := make([]time.Time, n)
			errs := tcpOnAll(bs, func(r int, b *tcpBackend) error {
				x := make([]float32, size)
				for i := 0; ; i++ {
					if r == closer && i == 3 {
						closedAt = time.Now()
						return b.Close()
					}
					if err := b.Allreduce(backend.BufferOf(x), backend.BufferOf(x), backend.Sum); err != nil {
						failedAt[r] = time.Now()
						return err
					}
				}
			})
			for r, err := range errs {
				if r == closer {
					continue
				}
				if err == nil {
					t.Fatalf("rank %d: no error", r)
				}
				if d := failedAt[r].Sub(closedAt); d > 2*time.Second {
					t.Errorf("rank %d (linked to rank %d: %v) failed %v after it closed: %v",
						r, closer, slices.Contains(meshPeers(r, n), closer), d, err)
				}
			}
		})
	}
}
