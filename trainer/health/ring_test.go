package health

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/trainer"
)

func TestAnalyzeRingLinks(t *testing.T) {
	four := func(gbs ...float64) []Sample {
		var s []Sample
		for r, g := range gbs {
			s = append(s, next(rank(r, []string{"node1", "node1", "node2", "node2"}[r], 1, 2), g))
		}
		return s
	}
	failed := four(2, 2, 2, 2)
	failed[1].NextGBs, failed[1].NextErr = 0, "rank 2 did not take the connection within 5s"
	onOneHost := func(s []Sample) []Sample {
		for i := range s {
			s[i].Host, s[i].CPUs = "vm", []int{0, 1}
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		samples []Sample
		want    []string
	}{
		{"even links", four(2.1, 1.9, 2.0, 1.6), nil},
		{"not measured (no ring probe)", four(0, 0, 0, 0), nil},
		{"a link at 60 %: noise", four(2, 2, 1.2, 2), nil},
		{"a slow cross-node link", four(2, 0.8, 2.1, 1.9),
			[]string{"link rank 1 → rank 2 (node1 → node2) at 0.40× the other links' median (0.800 GB/s vs 2.000 GB/s)"}},
		{"at the threshold", four(2, 2, 1, 2),
			[]string{"link rank 2 → rank 3 (node2 → node2) at 0.50× the other links' median (1.000 GB/s vs 2.000 GB/s)"}},
		{"the wrap-around link", four(2, 2, 2, 0.5),
			[]string{"link rank 3 → rank 0 (node2 → node1) at 0.25× the other links' median (0.500 GB/s vs 2.000 GB/s)"}},
		{"a link not measured is named", failed,
			[]string{"link rank 1 → rank 2 (node1 → node2): not measured: rank 2 did not take the connection within 5s"}},
		// Two ranks: the pair's two directions, not compared.
		{"two ranks", []Sample{next(rank(0, "a", 1, 0), 2), next(rank(1, "b", 1, 0), 0.5)}, nil},
		// Who gets a CPU is chance: only a failure is named.
		{"crowded: a slow link is not named", onOneHost(four(2, 0.5, 2, 2)), nil},
		{"crowded: a failed link is", onOneHost(failed),
			[]string{"link rank 1 → rank 2 (node1 → node2): not measured: rank 2 did not take the connection within 5s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, outlierTexts(tc.samples)); diff != "" {
				t.Errorf("outliers (-want +got):\n%s", diff)
			}
		})
	}
}

// slowWriter is the sending side of a throttled link: each write of a
// turn waits d first.
type slowWriter struct {
	net.Conn
	d time.Duration
}

func (s slowWriter) Write(b []byte) (int, error) {
	time.Sleep(s.d)
	return s.Conn.Write(b)
}

// ringReport runs ProbeRing on 4 in-process ranks (node1: 0, 1; node2:
// 2, 3; hosts[r] their machines) with o, and returns rank 0's report and
// how long the probe took.
func ringReport(t *testing.T, hosts []string, o RingOptions) (Report, time.Duration) {
	t.Helper()
	const n = 4
	w := trainer.NewLocalWorld(n)
	reps := make([]Report, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := o
			o.Host, o.silent = hosts[r], o.silent && r == 2
			s := Sample{Rank: r, Node: []string{"node1", "node1", "node2", "node2"}[r], Host: hosts[r]}
			link, err := ProbeRing(w.Comms[r], o)
			if errs[r] = err; err != nil {
				w.Abort()
				return
			}
			s.NextGBs, s.NextErr = link.GBs, link.Err
			all, err := Gather(w.Comms[r], s)
			if errs[r] = err; err == nil {
				reps[r] = Analyze(all, DefaultThresholds)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	sameReports(t, errs, reps)
	return reps[0], took
}

var oneHost = []string{"vm", "vm", "vm", "vm"}

// ringNamed are rep's ring-link outliers as "from→to".
func ringNamed(rep Report) []string {
	var got []string
	for _, o := range rep.Outliers {
		if o.Metric == "ring_link" {
			got = append(got, fmt.Sprintf("%d→%d", o.Ranks[0], o.Ranks[1]))
		}
	}
	return got
}

// TestRingThrottledLinkIsNamed: in the harness, the link 2 → 3 slowed by
// 30 ms a turn (4 MiB: some 20× its time over loopback) is named, and no
// other; the same ring without the throttle names nobody, every link
// measured. Links are measured in turns, so the slow one holds up no
// other's figure. 15 turns a link: 4 goroutine ranks share this machine's
// 2 CPUs with other work (even links measured 0.68-1.0× the others').
func TestRingThrottledLinkIsNamed(t *testing.T) {
	throttle := func(from, to int, c net.Conn) net.Conn {
		if from == 2 && to == 3 {
			return slowWriter{c, 30 * time.Millisecond}
		}
		return c
	}
	for _, tc := range []struct {
		name string
		wrap func(from, to int, c net.Conn) net.Conn
		want []string
	}{
		{"a slowed pair", throttle, []string{"2→3"}},
		{"even pairs", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, _ := ringReport(t, oneHost, RingOptions{Reps: 15, wrap: tc.wrap})
			if diff := cmp.Diff(tc.want, ringNamed(rep)); diff != "" {
				t.Errorf("ring-link outliers (-want +got):\n%s\nlinks: %+v", diff, rep.Links)
			}
			for _, l := range rep.Links {
				if !(l.GBs > 0) || l.Error != "" {
					t.Errorf("link %d → %d: %v GB/s, error %q: want it measured", l.From, l.To, l.GBs, l.Error)
				}
			}
		})
	}
}

// TestRingSilentNeighbour: rank 2 listens and never answers. The probe
// ends after its timeout, not later; the link to rank 2 is named as not
// measured, with rank 2 and the timeout; the other links are measured.
// Whether a measured link is also named slow is not this test's question
// (the best of the default 10 turns a link: on a loaded machine a healthy
// one measured at half the others', 3 → 0 once in CI, beside the silent
// link's timeout); TestRingThrottledLinkIsNamed asks it, with 15 turns
// and no link failing.
func TestRingSilentNeighbour(t *testing.T) {
	const timeout = time.Second
	rep, took := ringReport(t, oneHost, RingOptions{Bytes: 1 << 20, Timeout: timeout, silent: true})
	if took > 3*timeout+2*time.Second {
		t.Errorf("the probe took %v with a silent rank: want about its %v timeout", took, timeout)
	}
	if named := ringNamed(rep); !slices.Contains(named, "1→2") {
		t.Errorf("ring-link outliers %q lack 1→2\nlinks: %+v", named, rep.Links)
	}
	for _, l := range rep.Links {
		switch {
		case l.To == 2 && !strings.Contains(l.Error, "rank 2") || l.To == 2 && !strings.Contains(l.Error, "1s"):
			t.Errorf("link 1 → 2: error %q: want it to name rank 2 and the 1s timeout", l.Error)
		case l.To != 2 && !(l.GBs > 0):
			t.Errorf("link %d → %d: %v GB/s, error %q: want it measured", l.From, l.To, l.GBs, l.Error)
		}
	}
}

// Ranks on different machines connect over the addresses they announce,
// not loopback.
func TestRingByAddress(t *testing.T) {
	addrs, _ := net.InterfaceAddrs()
	if len(unicast(addrs)) == 0 {
		t.Skip("this machine has no global unicast address")
	}
	rep, _ := ringReport(t, []string{"a", "b", "c", "d"}, RingOptions{Bytes: 1 << 20})
	for _, l := range rep.Links {
		if !(l.GBs > 0) || l.Error != "" {
			t.Errorf("link %d → %d: %v GB/s, error %q: want it measured", l.From, l.To, l.GBs, l.Error)
		}
	}
}

func TestCardRoundTrip(t *testing.T) {
	long := strings.Repeat("h", 100)
	in := card{port: 65535, host: long, ips: []net.IP{net.ParseIP("10.0.0.2"), net.ParseIP("fd00::1")},
		secret: []byte(strings.Repeat("s", secretLen))}
	want := in
	want.host = long[:maxNode]
	want.ips = []net.IP{net.ParseIP("10.0.0.2").To16(), net.ParseIP("fd00::1")}
	if diff := cmp.Diff(want, decodeCard(in.encode()), cmp.AllowUnexported(card{})); diff != "" {
		t.Errorf("card (-want +got):\n%s", diff)
	}
}

// TestRingStalledTurn: the link 2 → 3 stalls for longer than the timeout
// in its turn (its sender asleep, its receiver waiting). Both ends give
// up at the timeout, the link is named with the size and the bound, and
// the other links are measured.
func TestRingStalledTurn(t *testing.T) {
	const timeout = time.Second
	stall := func(from, to int, c net.Conn) net.Conn {
		if from == 2 {
			return slowWriter{c, timeout + timeout/2}
		}
		return c
	}
	rep, took := ringReport(t, oneHost, RingOptions{Bytes: 1 << 20, Timeout: timeout, wrap: stall})
	if took > 3*timeout+2*time.Second {
		t.Errorf("the probe took %v with a stalled link: want about its %v timeout", took, timeout)
	}
	if named := ringNamed(rep); !slices.Contains(named, "2→3") { // the others: as in TestRingSilentNeighbour
		t.Errorf("ring-link outliers %q lack 2→3\nlinks: %+v", named, rep.Links)
	}
	for _, l := range rep.Links {
		switch {
		case l.From == 2 && !strings.HasPrefix(l.Error, "1 MiB to rank 3 took over 1s ("):
			t.Errorf("link 2 → 3: error %q: want it to name the size, rank 3 and the 1s timeout", l.Error)
		case l.From != 2 && !(l.GBs > 0):
			t.Errorf("link %d → %d: %v GB/s, error %q: want it measured", l.From, l.To, l.GBs, l.Error)
		}
	}
}
