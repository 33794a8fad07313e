package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/tcp/internal/rendezvous"
	"github.com/batchkit/batchkit/trainer/collective/tcp/internal/tcptest"
)

func tcpTestOptions(rank, size, port int) Options {
	return Options{Rank: rank, Size: size, MasterAddr: tcptest.MasterAddr, MasterPort: port, Token: tcptest.Token,
		Timeout: tcptest.Timeout, RendezvousTimeout: tcptest.RendezvousTimeout}
}

// tcpStartRanks runs New for the given ranks concurrently and returns the
// backends (nil where New failed) and errors, indexed by rank.
func tcpStartRanks(size, port int, ranks []int, tweak func(o *Options)) ([]*tcpBackend, []error) {
	bs := make([]*tcpBackend, size)
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
			b, err := New(o)
			errs[r] = err
			if err == nil {
				bs[r] = b.(*tcpBackend)
			}
		}()
	}
	wg.Wait()
	return bs, errs
}

func tcpAllRanks(n int) []int {
	rs := make([]int, n)
	for i := range rs {
		rs[i] = i
	}
	return rs
}

// tcpWorld forms a world of size ranks in this process.
func tcpWorld(t testing.TB, size int, tweak func(o *Options)) []*tcpBackend {
	t.Helper()
	bs, errs := tcpStartRanks(size, tcptest.FreePort(t), tcpAllRanks(size), tweak)
	t.Cleanup(func() {
		for _, b := range bs {
			if b != nil {
				b.Close()
			}
		}
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: New: %v", r, err)
		}
	}
	return bs
}

// tcpTransports: every in-process world test runs twice, once with the
// links between neighbours in shared memory (the default on one host) and
// once with every link on TCP (as between hosts).
var tcpTransports = []struct {
	name  string
	tweak func(o *Options)
}{
	{"shm", nil},
	{"tcp", func(o *Options) { o.NoShm = true }},
}

// forTransports runs f as a subtest per transport.
func forTransports(t *testing.T, f func(t *testing.T, tweak func(o *Options))) {
	for _, tr := range tcpTransports {
		t.Run(tr.name, func(t *testing.T) { f(t, tr.tweak) })
	}
}

// withTweaks applies several option tweaks in order (nil ones skipped).
func withTweaks(tweaks ...func(o *Options)) func(o *Options) {
	return func(o *Options) {
		for _, f := range tweaks {
			if f != nil {
				f(o)
			}
		}
	}
}

// tcpOnAll runs f on every rank concurrently.
func tcpOnAll(bs []*tcpBackend, f func(r int, b *tcpBackend) error) []error {
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for r, b := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(r, b)
		}()
	}
	wg.Wait()
	return errs
}

func tcpNoErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// tvec is a float32 or float64 slice seen through float64.
type tvec struct {
	t   backend.DType
	f32 []float32
	f64 []float64
}

func newTVec(t backend.DType, n int) tvec {
	if t == backend.Float32 {
		return tvec{t: t, f32: make([]float32, n)}
	}
	return tvec{t: t, f64: make([]float64, n)}
}

func (v tvec) len() int {
	if v.t == backend.Float32 {
		return len(v.f32)
	}
	return len(v.f64)
}

func (v tvec) buf() backend.Buffer {
	if v.t == backend.Float32 {
		return backend.BufferOf(v.f32)
	}
	return backend.BufferOf(v.f64)
}

func (v tvec) set(i int, x float64) {
	if v.t == backend.Float32 {
		v.f32[i] = float32(x)
	} else {
		v.f64[i] = x
	}
}

func (v tvec) get(i int) float64 {
	if v.t == backend.Float32 {
		return float64(v.f32[i])
	}
	return v.f64[i]
}

func (v tvec) bytes() []byte { return bytes.Clone(v.buf().Bytes()) }

// val is rank r's element i: small integers, so sums are exact in any order.
func tcpVal(r, i int) float64 { return float64((i*7+r*13)%17 - 8) }

func tcpFold(op backend.Op, xs ...float64) float64 {
	acc := xs[0]
	for _, x := range xs[1:] {
		switch op {
		case backend.Sum:
			acc += x
		case backend.Max:
			acc = math.Max(acc, x)
		case backend.Min:
			acc = math.Min(acc, x)
		}
	}
	return acc
}

// tcpSameBytes compares memory exactly, reporting the first differing element
// (with go-cmp, on a window around it) rather than megabytes of diff.
func tcpSameBytes(t *testing.T, what string, want, got tvec) {
	t.Helper()
	wb, gb := want.buf().Bytes(), got.buf().Bytes()
	if bytes.Equal(wb, gb) {
		return
	}
	es := want.t.Size()
	i := 0
	for i < len(wb)/es && bytes.Equal(wb[i*es:(i+1)*es], gb[i*es:(i+1)*es]) {
		i++
	}
	lo, hi := max(0, i-2), min(want.len(), i+3)
	w, g := make([]float64, 0, hi-lo), make([]float64, 0, hi-lo)
	for j := lo; j < hi; j++ {
		w, g = append(w, want.get(j)), append(g, got.get(j))
	}
	t.Fatalf("%s: first difference at element %d of %d; elements %d..%d (-want +got):\n%s",
		what, i, want.len(), lo, hi-1, cmp.Diff(w, g))
}

var (
	tcpTestSizes = []int{1, 3, 7, 1000, 1<<17 + 3}
	tcpTestTypes = []backend.DType{backend.Float32, backend.Float64}
	tcpTestOps   = []backend.Op{backend.Sum, backend.Max, backend.Min}
)

// TestTCPCollectives checks every operation against exact expected values
// and checks that all ranks hold identical bytes.
func TestTCPCollectives(t *testing.T) {
	forTransports(t, func(t *testing.T, tweak func(o *Options)) {
		for _, tuning := range []string{"default", "tiny"} {
			for n := 1; n <= 5; n++ {
				t.Run(fmt.Sprintf("%s/world%d", tuning, n), func(t *testing.T) {
					if tuning == "tiny" {
						// Every algorithm and many pipeline segments at
						// every size; shared-memory rings that wrap in
						// every message, at no power of two, with
						// wake-ups far below the message sizes.
						defer tcpTune(1<<10, 1<<10, 16<<10)()
						defer tcpTuneShm(12296, 1000)()
					}
					tcpCollectives(t, n, tweak)
				})
			}
		}
	})
}

// tcpTune sets the algorithm thresholds and returns their restorer.
func tcpTune(rd, tree, seg int) func() {
	old := []int{rdMax, treeMax, segBytes}
	rdMax, treeMax, segBytes = rd, tree, seg
	return func() { rdMax, treeMax, segBytes = old[0], old[1], old[2] }
}

// tcpTuneShm sets the shared-memory ring's size and wake-up chunk (for
// worlds formed afterwards) and returns their restorer.
func tcpTuneShm(ring, chunk int) func() {
	oldRing, oldChunk := shmRingBytes, shmChunk
	shmRingBytes, shmChunk = ring, chunk
	return func() { shmRingBytes, shmChunk = oldRing, oldChunk }
}

func tcpCollectives(t *testing.T, n int, tweak func(o *Options)) {
	bs := tcpWorld(t, n, tweak)
	for _, c := range tcpCases(n) {
		t.Run(c.name, func(t *testing.T) { c.check(t, bs) })
	}
}

type tcpCase struct {
	name  string
	check func(t *testing.T, bs []*tcpBackend)
}

// tcpCases is the table: every operation × type × size (× op × in/out of
// place for allreduce, × root for broadcast).
func tcpCases(n int) []tcpCase {
	var cs []tcpCase
	add := func(check func(t *testing.T, bs []*tcpBackend), format string, args ...any) {
		cs = append(cs, tcpCase{fmt.Sprintf(format, args...), check})
	}
	for _, dt := range tcpTestTypes {
		for _, size := range tcpTestSizes {
			for _, op := range tcpTestOps {
				for _, inPlace := range []bool{false, true} {
					add(func(t *testing.T, bs []*tcpBackend) { tcpCheckAllreduce(t, bs, dt, op, size, inPlace) },
						"allreduce/%v/%v/n%d/inplace=%v", dt, op, size, inPlace)
				}
				add(func(t *testing.T, bs []*tcpBackend) { tcpCheckReduceScatter(t, bs, dt, op, size) },
					"reducescatter/%v/%v/n%d", dt, op, size)
			}
			add(func(t *testing.T, bs []*tcpBackend) { tcpCheckAllgather(t, bs, dt, size) }, "allgather/%v/n%d", dt, size)
			for root := range n {
				add(func(t *testing.T, bs []*tcpBackend) { tcpCheckBroadcast(t, bs, dt, size, root) },
					"broadcast/%v/n%d/root%d", dt, size, root)
			}
		}
	}
	add(tcpCheckBarrier, "barrier")
	return cs
}

func tcpCheckAllreduce(t *testing.T, bs []*tcpBackend, dt backend.DType, op backend.Op, size int, inPlace bool) {
	n := len(bs)
	sends, recvs := make([]tvec, n), make([]tvec, n)
	for r := range n {
		sends[r] = newTVec(dt, size)
		for i := range size {
			sends[r].set(i, tcpVal(r, i))
		}
		recvs[r] = sends[r]
		if !inPlace {
			recvs[r] = newTVec(dt, size)
		}
	}
	want := newTVec(dt, size)
	xs := make([]float64, n)
	for i := range size {
		for r := range n {
			xs[r] = tcpVal(r, i)
		}
		want.set(i, tcpFold(op, xs...))
	}
	tcpNoErrors(t, tcpOnAll(bs, func(r int, b *tcpBackend) error { return b.Allreduce(sends[r].buf(), recvs[r].buf(), op) }))
	for r := range n {
		tcpSameBytes(t, fmt.Sprintf("rank %d result", r), want, recvs[r])
		if !inPlace {
			orig := newTVec(dt, size)
			for i := range size {
				orig.set(i, tcpVal(r, i))
			}
			tcpSameBytes(t, fmt.Sprintf("rank %d send buffer (must be untouched)", r), orig, sends[r])
		}
	}
}

func tcpCheckReduceScatter(t *testing.T, bs []*tcpBackend, dt backend.DType, op backend.Op, m int) {
	n := len(bs)
	sends, recvs := make([]tvec, n), make([]tvec, n)
	for r := range n {
		sends[r], recvs[r] = newTVec(dt, n*m), newTVec(dt, m)
		for i := range n * m {
			sends[r].set(i, tcpVal(r, i))
		}
	}
	tcpNoErrors(t, tcpOnAll(bs, func(r int, b *tcpBackend) error { return b.ReduceScatter(sends[r].buf(), recvs[r].buf(), op) }))
	xs := make([]float64, n)
	for r := range n {
		want := newTVec(dt, m)
		for i := range m {
			for q := range n {
				xs[q] = tcpVal(q, r*m+i)
			}
			want.set(i, tcpFold(op, xs...))
		}
		tcpSameBytes(t, fmt.Sprintf("rank %d block", r), want, recvs[r])
		orig := newTVec(dt, n*m)
		for i := range n * m {
			orig.set(i, tcpVal(r, i))
		}
		tcpSameBytes(t, fmt.Sprintf("rank %d send buffer (must be untouched)", r), orig, sends[r])
	}
}

func tcpCheckAllgather(t *testing.T, bs []*tcpBackend, dt backend.DType, m int) {
	n := len(bs)
	sends, recvs := make([]tvec, n), make([]tvec, n)
	want := newTVec(dt, n*m)
	for r := range n {
		sends[r], recvs[r] = newTVec(dt, m), newTVec(dt, n*m)
		for i := range m {
			sends[r].set(i, tcpVal(r, i))
			want.set(r*m+i, tcpVal(r, i))
		}
	}
	tcpNoErrors(t, tcpOnAll(bs, func(r int, b *tcpBackend) error { return b.Allgather(sends[r].buf(), recvs[r].buf()) }))
	for r := range n {
		tcpSameBytes(t, fmt.Sprintf("rank %d", r), want, recvs[r])
	}
}

func tcpCheckBroadcast(t *testing.T, bs []*tcpBackend, dt backend.DType, size, root int) {
	n := len(bs)
	bufs := make([]tvec, n)
	want := newTVec(dt, size)
	for r := range n {
		bufs[r] = newTVec(dt, size)
		for i := range size {
			bufs[r].set(i, tcpVal(r, i)+100) // overwritten on non-roots
			want.set(i, tcpVal(root, i)+100)
		}
	}
	tcpNoErrors(t, tcpOnAll(bs, func(r int, b *tcpBackend) error { return b.Broadcast(bufs[r].buf(), root) }))
	for r := range n {
		tcpSameBytes(t, fmt.Sprintf("rank %d", r), want, bufs[r])
	}
}

func tcpCheckBarrier(t *testing.T, bs []*tcpBackend) {
	n := len(bs)
	const rounds = 20
	var entered [rounds]atomic.Int32
	tcpNoErrors(t, tcpOnAll(bs, func(r int, b *tcpBackend) error {
		for i := range rounds {
			if (r+i)%n == 0 {
				time.Sleep(2 * time.Millisecond) // a late rank
			}
			entered[i].Add(1)
			if err := b.Barrier(); err != nil {
				return err
			}
			if got := entered[i].Load(); got != int32(n) {
				return fmt.Errorf("round %d: left the barrier with %d of %d ranks entered", i, got, n)
			}
		}
		return nil
	}))
}

// TestTCPSpecialValues: NaN, infinities and signed zeros follow math.Max /
// math.Min, and every rank gets the same bits even where the sum's NaN
// payload depends on operand order.
func TestTCPSpecialValues(t *testing.T) {
	nan1 := math.Float64frombits(0x7ff8000000000bad)
	nan2 := math.Float64frombits(0xfff8000000000001)
	specials := []float64{0, math.Copysign(0, -1), 1, -1, math.Inf(1), math.Inf(-1), nan1, nan2, 2.5}
	for _, n := range []int{2, 3, 4, 5} {
		bs := tcpWorld(t, n, nil)
		for _, dt := range tcpTestTypes {
			for _, op := range tcpTestOps {
				for _, size := range []int{len(specials) * len(specials), 100000} { // both algorithms
					t.Run(fmt.Sprintf("world%d/%v/%v/n%d", n, dt, op, size), func(t *testing.T) {
						vs := make([]tvec, n)
						for r := range n {
							vs[r] = newTVec(dt, size)
							for i := range size {
								// Rank-dependent mixes of every pair of specials.
								vs[r].set(i, specials[(i/tcpIpow(len(specials), r%2)+r/2)%len(specials)])
							}
						}
						inputs := make([]tvec, n)
						for r := range n {
							inputs[r] = newTVec(dt, size)
							copy(inputs[r].buf().Bytes(), vs[r].buf().Bytes())
						}
						tcpNoErrors(t, tcpOnAll(bs, func(r int, b *tcpBackend) error { return b.Allreduce(vs[r].buf(), vs[r].buf(), op) }))
						for r := 1; r < n; r++ {
							tcpSameBytes(t, fmt.Sprintf("rank %d vs rank 0", r), vs[0], vs[r])
						}
						if op == backend.Sum {
							return
						}
						want := newTVec(dt, size)
						xs := make([]float64, n)
						for i := range size {
							for r := range n {
								xs[r] = inputs[r].get(i)
							}
							want.set(i, tcpFold(op, xs...))
						}
						tcpSameBytes(t, "result vs math."+op.String(), want, vs[0])
					})
				}
			}
		}
	}
}

func tcpIpow(b, e int) int {
	p := 1
	for range e {
		p *= b
	}
	return p
}

// TestTCPHeaderMismatch: ranks calling different collectives get an error
// saying so instead of reading each other's bytes.
func TestTCPHeaderMismatch(t *testing.T) { forTransports(t, tcpHeaderMismatch) }

func tcpHeaderMismatch(t *testing.T, tweak func(o *Options)) {
	bs := tcpWorld(t, 2, tweak)
	errs := tcpOnAll(bs, func(r int, b *tcpBackend) error {
		x := make([]float32, 10+r)
		return b.Allreduce(backend.BufferOf(x), backend.BufferOf(x), backend.Sum)
	})
	// Whoever reads the other's header first says why; the other may
	// only see the connection drop.
	mismatch := 0
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d: no error", r)
		}
		t.Logf("rank %d: %v", r, err)
		if strings.Contains(err.Error(), "same collectives in the same order") {
			mismatch++
		}
	}
	if mismatch == 0 {
		t.Errorf("no rank reported the mismatch")
	}
	// Later calls return the same error.
	x := []float32{1}
	if err := bs[0].Allreduce(backend.BufferOf(x), backend.BufferOf(x), backend.Sum); err == nil || err.Error() != errs[0].Error() {
		t.Errorf("later call: got %v, want %v", err, errs[0])
	}
}

func TestTCPClose(t *testing.T) { forTransports(t, tcpClose) }

func tcpClose(t *testing.T, tweak func(o *Options)) {
	bs := tcpWorld(t, 2, tweak)
	for range 2 {
		if err := bs[0].Close(); err != nil {
			t.Fatal(err)
		}
	}
	x := []float64{1}
	if err := bs[0].Allreduce(backend.BufferOf(x), backend.BufferOf(x), backend.Sum); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("after Close: got %v, want ErrClosed", err)
	}
	start := time.Now()
	err := bs[1].Allreduce(backend.BufferOf(x), backend.BufferOf(x), backend.Sum)
	if err == nil || !strings.Contains(err.Error(), "rank 0") {
		t.Errorf("peer of a closed rank: got %v, want an error naming rank 0", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("peer of a closed rank took %v to fail", d)
	}
}

// TestTCPPeerClosesMidAllreduce: one rank closes during a large allreduce;
// the others fail within 2 s although the timeout is a minute.
func TestTCPPeerClosesMidAllreduce(t *testing.T) {
	forTransports(t, tcpPeerClosesMidAllreduce)
}

func tcpPeerClosesMidAllreduce(t *testing.T, tweak func(o *Options)) {
	for _, size := range []int{8, 4 << 20} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			const n = 4
			bs := tcpWorld(t, n, tweak)
			var closedAt atomic.Int64
			failedAt := make([]time.Time, n)
			errs := tcpOnAll(bs, func(r int, b *tcpBackend) error {
				x := make([]float32, size)
				for i := 0; ; i++ {
					if r == 2 && i == 3 {
						go func() {
							time.Sleep(time.Millisecond)
							closedAt.Store(time.Now().UnixNano())
							b.Close()
						}()
					}
					if err := b.Allreduce(backend.BufferOf(x), backend.BufferOf(x), backend.Sum); err != nil {
						failedAt[r] = time.Now()
						return err
					}
					if r == 2 && i > 3 {
						time.Sleep(time.Millisecond) // closing: wait for it
					}
				}
			})
			c := time.Unix(0, closedAt.Load())
			for r, err := range errs {
				if r == 2 {
					continue
				}
				if d := failedAt[r].Sub(c); d > 2*time.Second {
					t.Errorf("rank %d failed %v after rank 2 closed", r, d)
				}
				t.Logf("rank %d: %v", r, err)
				x := []float32{1}
				if again := bs[r].Allreduce(backend.BufferOf(x), backend.BufferOf(x), backend.Sum); again == nil || again.Error() != err.Error() {
					t.Errorf("rank %d: later call returned %v, want the first error %v", r, again, err)
				}
			}
		})
	}
}

// TestTCPSilentPeer: a rank that stays connected but never joins the
// collective makes the others fail after Timeout.
func TestTCPSilentPeer(t *testing.T) { forTransports(t, tcpSilentPeer) }

func tcpSilentPeer(t *testing.T, tweak func(o *Options)) {
	const timeout = 300 * time.Millisecond
	bs := tcpWorld(t, 3, withTweaks(tweak, func(o *Options) { o.Timeout = timeout }))
	start := time.Now()
	errs := tcpOnAll(bs[:2], func(r int, b *tcpBackend) error {
		x := make([]float64, 100)
		return b.Allreduce(backend.BufferOf(x), backend.BufferOf(x), backend.Max)
	})
	d := time.Since(start)
	if d < timeout || d > timeout+2*time.Second {
		t.Errorf("failed after %v, want about %v", d, timeout)
	}
	sawTimeout := false
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d: no error", r)
		}
		t.Logf("rank %d: %v", r, err)
		sawTimeout = sawTimeout || strings.Contains(err.Error(), "nothing from rank 2 ") && strings.Contains(err.Error(), "for 300ms")
	}
	if !sawTimeout {
		t.Errorf("no error names the silent rank 2 and the timeout")
	}
}

func TestTCPRendezvousTimeout(t *testing.T) {
	port := tcptest.FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	short := func(o *Options) { o.RendezvousTimeout = 500 * time.Millisecond }

	t.Run("missing ranks", func(t *testing.T) {
		start := time.Now()
		_, errs := tcpStartRanks(4, port, []int{0, 1}, short)
		want := "rendezvous at " + addr + " timed out after 500ms: ranks 2, 3 of 4 never connected"
		if errs[0] == nil || errs[0].Error() != want {
			t.Errorf("rank 0: got %v\nwant %s", errs[0], want)
		}
		if errs[1] == nil || !strings.Contains(errs[1].Error(), want) {
			t.Errorf("rank 1: got %v, want it to relay %q", errs[1], want)
		}
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("took %v", d)
		}
	})
	t.Run("no rank 0", func(t *testing.T) {
		_, errs := tcpStartRanks(2, port, []int{1}, short)
		want := "rendezvous: could not reach rank 0 at " + addr + " within 500ms: "
		if errs[1] == nil || !strings.HasPrefix(errs[1].Error(), want) || !strings.Contains(errs[1].Error(), "refused") {
			t.Errorf("got %v, want %q + the dial error", errs[1], want)
		}
	})
	t.Run("port taken", func(t *testing.T) {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			t.Skip(err)
		}
		defer l.Close()
		_, errs := tcpStartRanks(2, port, []int{0}, short)
		var se *backend.SetupError
		if errs[0] == nil || !strings.Contains(errs[0].Error(), "port "+strconv.Itoa(port)) || !strings.Contains(errs[0].Error(), "MASTER_PORT") || !errors.As(errs[0], &se) {
			t.Errorf("got %v (%T), want the port and a MASTER_PORT hint, a *SetupError", errs[0], errs[0])
		}
	})
	// An address that cannot work fails at once, not after the timeout:
	// one that does not parse, and a name the resolver says does not exist
	// (checked only where the resolver answers so).
	for addr, want := range map[string]string{
		"[::1":                 `rendezvous: MASTER_ADDR "[::1": `,
		"no-such-host.invalid": "rendezvous: MASTER_ADDR=no-such-host.invalid does not resolve: lookup no-such-host.invalid",
	} {
		t.Run("bad address "+addr, func(t *testing.T) {
			if _, err := net.LookupHost(addr); addr == "no-such-host.invalid" && !tcpNotFound(err) {
				t.Skipf("the resolver does not say %s does not exist: %v", addr, err)
			}
			start := time.Now()
			_, errs := tcpStartRanks(2, port, []int{1}, func(o *Options) {
				o.RendezvousTimeout = 5 * time.Second
				o.MasterAddr = addr
			})
			var se *backend.SetupError
			if errs[1] == nil || !strings.HasPrefix(errs[1].Error(), want) || !errors.As(errs[1], &se) {
				t.Errorf("got %v (%T), want %q..., a *SetupError", errs[1], errs[1], want)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v, want an immediate failure", d)
			}
		})
	}
}

// tcpNotFound: err says the name does not exist.
func tcpNotFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

func TestTCPWrongTokenRank(t *testing.T) {
	var logs tcptest.Log
	bs, errs := tcpStartRanks(2, tcptest.FreePort(t), tcpAllRanks(2), func(o *Options) {
		o.RendezvousTimeout = time.Second
		o.Logf = logs.Logf
		if o.Rank == 1 {
			o.Token = "some other job"
		}
	})
	for _, b := range bs {
		if b != nil {
			b.Close()
		}
	}
	var se *backend.SetupError
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "job tokens differ") || !errors.As(errs[1], &se) {
		t.Errorf("rank 1: got %v (%T), want a token error, a *SetupError", errs[1], errs[1])
	}
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "rank 1 of 2 never connected (1 connection(s) refused meanwhile: a wrong job token") {
		t.Errorf("rank 0: got %v, want rank 1 missing and the refusal counted", errs[0])
	}
	if len(logs.Grep("bad job token")) == 0 {
		t.Errorf("rank 0 did not log the refusal; logs: %q", logs.Lines())
	}
}

// tcpRogue plays a dialer that does not know the token: a valid
// hello claiming claim, then a made-up proof. It returns what came back.
func tcpRogue(addr string, claim int, mesh bool) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	h, err := rendezvous.TestHello(claim, 3, mesh)
	if err != nil {
		return err
	}
	// Everything at once: the acceptor has it all when it gets to us.
	if _, err := c.Write(append(h, "not the right proof, but 32 byte"...)); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadAll(c) // the acceptor's hello, then the close
	return err
}

// TestTCPRogueConnections: connections without the token, garbage and a
// silent connector, during rendezvous and during mesh building, are refused
// and logged, and the world still forms promptly.
func TestTCPRogueConnections(t *testing.T) {
	const n = 3
	port := tcptest.FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logs := make([]*tcptest.Log, n)
	for r := range logs {
		logs[r] = &tcptest.Log{}
	}
	tweak := func(o *Options) { o.Logf = logs[o.Rank].Logf }

	// Rank 0 first, alone, with rogues knocking.
	var bs0 []*tcpBackend
	var errs0 []error
	done0 := make(chan struct{})
	go func() {
		bs0, errs0 = tcpStartRanks(n, port, []int{0}, tweak)
		close(done0)
	}()
	var silent net.Conn
	for deadline := time.Now().Add(5 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			silent = c // says nothing, ever
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer silent.Close()
	if err := tcpRogue(addr, 1, false); err != nil {
		t.Fatalf("rogue at rendezvous: %v", err)
	}
	garbage, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	garbage.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n.........................."))
	garbage.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.ReadAll(garbage)
	garbage.Close()

	// Rank 2 gets a rogue on its mesh listener the moment it accepts, and
	// goes on once the rogue has been refused (else the mesh could form
	// first and drop the rogue's handshake unlogged, as it should).
	rogueMesh := make(chan error, 1)
	rendezvous.TestHookMeshListener = func(rank int, a net.Addr) {
		if rank == 2 {
			port := strconv.Itoa(a.(*net.TCPAddr).Port)
			rogueMesh <- tcpRogue(net.JoinHostPort("127.0.0.1", port), 1, true)
		}
	}
	defer func() { rendezvous.TestHookMeshListener = nil }()

	start := time.Now()
	bs, errs := tcpStartRanks(n, port, []int{1, 2}, tweak)
	<-done0
	bs[0], errs[0] = bs0[0], errs0[0]
	defer func() {
		for _, b := range bs {
			if b != nil {
				b.Close()
			}
		}
	}()
	tcpNoErrors(t, errs)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("world took %v to form: a rogue stalled it", d)
	}
	if err := <-rogueMesh; err != nil {
		t.Errorf("rogue at mesh: %v", err)
	}
	for _, c := range []struct {
		rank int
		want string
	}{
		{0, "bad job token"},
		{0, "not a batchkit collective peer"},
		{2, "bad job token"},
	} {
		prefix := fmt.Sprintf("collective: rank %d refused a connection from 127.0.0.1:", c.rank)
		if got := logs[c.rank].Grep(c.want); len(got) == 0 || !strings.HasPrefix(got[0], prefix) {
			t.Errorf("rank %d: no %q refusal logged; logs: %q", c.rank, c.want, logs[c.rank].Lines())
		}
	}
	// And the world works.
	x := make([][]float32, n)
	tcpNoErrors(t, tcpOnAll(bs, func(r int, b *tcpBackend) error {
		x[r] = []float32{float32(r)}
		return b.Allreduce(backend.BufferOf(x[r]), backend.BufferOf(x[r]), backend.Sum)
	}))
	for r := range n {
		if x[r][0] != 3 {
			t.Errorf("rank %d: got %v, want 3", r, x[r][0])
		}
	}
}

func TestTCPAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	forTransports(t, tcpAllocs)
}

func tcpAllocs(t *testing.T, tweak func(o *Options)) {
	for _, n := range []int{2, 4} {
		for _, size := range []int{8, 1 << 20} { // recursive doubling, ring
			t.Run(fmt.Sprintf("world%d/%d", n, size), func(t *testing.T) {
				bs := tcpWorld(t, n, tweak)
				const runs = 50
				var allocs float64
				tcpNoErrors(t, tcpOnAll(bs, func(r int, b *tcpBackend) error {
					send, recv := make([]float32, size), make([]float32, size)
					var err error
					f := func() {
						if e := b.Allreduce(backend.BufferOf(send), backend.BufferOf(recv), backend.Sum); e != nil && err == nil {
							err = e
						}
					}
					f() // grow the scratch space
					if r == 0 {
						allocs = testing.AllocsPerRun(runs, f) // counts every rank's allocations
					} else {
						for range runs + 1 {
							f()
						}
					}
					return err
				}))
				if allocs != 0 {
					t.Errorf("%v allocations per allreduce, want 0", allocs)
				}
			})
		}
	}
}

// TestTCPAliveAllocs: the liveness check that a wait on shared memory makes
// every shmPoll allocates nothing. On a loaded machine waits that long
// come in steady state too: a closure made per check once showed up in
// TestTCPAllocs as an allocation per allreduce (4 ranks, 1 MiB, CI). The
// check still tells a live peer from one that closed.
func TestTCPAliveAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	bs := tcpWorld(t, 2, nil)
	p := bs[0].peers[1]
	for _, sending := range []bool{false, true} {
		var err error
		if n := testing.AllocsPerRun(100, func() { err = p.alive(sending) }); n != 0 || err != nil {
			t.Errorf("alive(sending=%v): %v allocations, %v; want 0, nil", sending, n, err)
		}
	}
	if err := bs[1].Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.alive(false) == nil {
		if time.Now().After(deadline) {
			t.Fatal("alive() still nil 5 s after the peer closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTCPMisconfiguredWorld: ranks that authenticate but do not fit the
// world make rank 0 fail the rendezvous at once, saying why, instead of
// timing out.
func TestTCPMisconfiguredWorld(t *testing.T) {
	for _, c := range []struct {
		name  string
		ranks []Options // Rank and Size; the rest filled in
		want  string    // in rank 0's error
	}{
		{"duplicate rank", []Options{{Rank: 0, Size: 3}, {Rank: 1, Size: 3}, {Rank: 1, Size: 3}}, "rank 1 joined twice"},
		{"world size", []Options{{Rank: 0, Size: 3}, {Rank: 1, Size: 2}}, "world size mismatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			port := tcptest.FreePort(t)
			errs := make([]error, len(c.ranks))
			var wg sync.WaitGroup
			start := time.Now()
			for i, ro := range c.ranks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if i > 0 {
						time.Sleep(time.Duration(i) * 50 * time.Millisecond) // join in order
					}
					o := tcpTestOptions(ro.Rank, ro.Size, port)
					o.RendezvousTimeout = 10 * time.Second
					b, err := New(o)
					if err == nil {
						b.Close()
					}
					errs[i] = err
				}()
			}
			wg.Wait()
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v: rank 0 should fail at once", d)
			}
			// Rank 0, which found the problem, calls it the job's setup.
			var se *backend.SetupError
			if !errors.As(errs[0], &se) {
				t.Errorf("rank 0: %T, want a *SetupError", errs[0])
			}
			for i, err := range errs {
				t.Logf("process %d: %v", i, err)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("process %d: got %v, want an error containing %q", i, err, c.want)
				}
			}
		})
	}
}
