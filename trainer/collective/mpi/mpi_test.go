//go:build (mpi || mpich) && !(mpi && mpich)

package mpi_test

// The MPI backend's own tests. They are meaningful under a launcher, every
// rank running the same binary:
//
//	go test -c -tags mpi -o /tmp/coll_ompi.test ./trainer/collective/mpi
//	mpirun.openmpi --allow-run-as-root --oversubscribe -n 2 /tmp/coll_ompi.test -test.run TestMPI -test.v
//	go test -c -tags mpich -o /tmp/coll_mpich.test ./trainer/collective/mpi
//	mpirun.mpich -n 3 /tmp/coll_mpich.test -test.run TestMPI -test.v
//	srun -N2 -n4 --mpi=pmi2 /tmp/coll_mpich.test -test.run TestMPI
//
// Without a launcher they run as a world of one (an MPI singleton).
//
// TestMPI finalises MPI at its end (a process must, or the launcher reports
// it as failed), so no MPI test can run after it in the same process.
// Failures are reported with t.Error, never t.Fatal, once collectives have
// started, so that every rank keeps issuing the same calls in the same order.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/internal/conform"
	"github.com/batchkit/batchkit/trainer/collective/mpi"
)

func TestMPI(t *testing.T) {
	if mpi.Finalized() {
		t.Skip("MPI was already finalised in this process (by an earlier test)")
	}
	topo, err := detect.Detect(os.Getenv, detect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	initsBefore, finalizedBefore := mpi.StateCounters().InitCalls, mpi.StateCounters().Finalized
	externallyInitialised := mpi.Initialized()
	procsBefore := runtime.GOMAXPROCS(0)

	cfg := collective.Config{Topology: topo, Backend: collective.MPI, Getenv: os.Getenv}
	c, err := collective.Init(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rank %d of %d, local rank %d (launcher: %d), %s launcher, MPI built: %s", c.Rank(), c.Size(), c.LocalRank(), topo.LocalRank, topo.Launcher, collective.MPIBuilt)

	t.Run("init twice", func(t *testing.T) {
		again, err := collective.Init(cfg)
		if err != nil || again != c {
			t.Errorf("second Init = %p, %v; want the first communicator %p", again, err, c)
		}
		// Auto (and the zero value) take the open world, even where Auto
		// alone would pick tcp (no launcher: a singleton).
		for _, k := range []collective.Kind{collective.Auto, ""} {
			auto := cfg
			auto.Backend = k
			if again, err := collective.Init(auto); err != nil || again != c {
				t.Errorf("Init with Backend %q = %p, %v; want the first communicator %p", k, again, err, c)
			}
		}
		tcp := cfg
		tcp.Backend = collective.TCP
		if _, err := collective.Init(tcp); err == nil || !strings.Contains(err.Error(), "cannot switch to tcp") {
			t.Errorf("Init with tcp over an open mpi world: %v, want a refusal", err)
		}
		want := 1
		if externallyInitialised {
			want = 0
		}
		if got := mpi.StateCounters().InitCalls - initsBefore; got != want {
			t.Errorf("MPI_Init_thread called %d times, want %d", got, want)
		}
		if mpi.StateCounters().Open != 1 {
			t.Errorf("%d MPI communicators open, want 1", mpi.StateCounters().Open)
		}
	})

	m := mpi.Newest() // the backend under c
	if c.Backend() != "mpi" || m == nil {
		t.Fatalf("backend is %q (newest MPI backend %v), want mpi", c.Backend(), m)
	}

	t.Run("world", func(t *testing.T) {
		if c.Backend() != "mpi" || c.Rank() != topo.Rank || c.Size() != topo.WorldSize {
			t.Errorf("backend %q rank %d of %d, launcher says rank %d of %d", c.Backend(), c.Rank(), c.Size(), topo.Rank, topo.WorldSize)
		}
		if l := c.LocalRank(); l < 0 || l >= c.Size() || (topo.NumNodes == 1 && l != topo.LocalRank) {
			t.Errorf("local rank %d; launcher says %d (%d nodes)", l, topo.LocalRank, topo.NumNodes)
		}
		// The library leaves process-wide state to the program (mpi.SetupProcess).
		if got := runtime.GOMAXPROCS(0); got != procsBefore {
			t.Errorf("Init changed GOMAXPROCS from %d to %d", procsBefore, got)
		}
		mpi.SetupProcess(os.Getenv)
		if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 2 {
			t.Errorf("GOMAXPROCS is %d after mpi.SetupProcess, want at least 2", runtime.GOMAXPROCS(0))
		}
		// Every rank appears once, in order.
		ranks := make([]float64, c.Size())
		if err := collective.Allgather(c, []float64{float64(c.Rank())}, ranks); err != nil {
			t.Fatal(err)
		}
		for i, r := range ranks {
			if int(r) != i {
				t.Errorf("gathered ranks %v", ranks)
				break
			}
		}
	})

	// The shared conformance suite (internal/conform), natively and through
	// the fallbacks; then again with every call handed to the worker thread.
	t.Run("conformance", func(t *testing.T) { conform.World(t, c) })
	t.Run("conformance on the worker thread", func(t *testing.T) {
		was := m.HandoffThreshold()
		defer m.SetHandoffThreshold(was)
		m.SetHandoffThreshold(1)
		conform.World(t, c)
	})

	t.Run("go signals", func(t *testing.T) {
		// MPI (or UCX under it) must not have taken over SIGSEGV: a nil
		// dereference is still a Go panic that recover catches.
		var got any
		func() {
			defer func() { got = recover() }()
			var p *int
			_ = *p
		}()
		if err, ok := got.(error); !ok || !strings.Contains(err.Error(), "nil pointer dereference") {
			t.Errorf("nil dereference after MPI_Init: recovered %v, want a nil pointer panic", got)
		}
	})
	t.Run("errors", func(t *testing.T) { testMPIErrors(t, c, m) })
	t.Run("ops", func(t *testing.T) { testMPIOps(t, c) })
	t.Run("chunking", func(t *testing.T) { testMPIChunking(t, c, m) })
	t.Run("goroutines", func(t *testing.T) { testMPIGoroutines(t, c) })
	t.Run("worker", func(t *testing.T) { testMPIWorker(t, c, m) })

	t.Run("second communicator", func(t *testing.T) {
		// MPI is initialised (by us): a second backend dups its own
		// communicator, does not initialise MPI again and does not finalise it.
		inits := mpi.StateCounters().InitCalls
		b, err := mpi.New(topo, os.Getenv)
		if err != nil {
			t.Fatal(err) // every rank fails alike
		}
		m2 := b.(*mpi.Backend)
		if m2.Comm() == m.Comm() || mpi.StateCounters().InitCalls != inits || mpi.StateCounters().Open != 2 {
			t.Errorf("second backend: comm %v (first %v), %d init calls (was %d), %d open", m2.Comm(), m.Comm(), mpi.StateCounters().InitCalls, inits, mpi.StateCounters().Open)
		}
		x := []float64{float64(c.Rank() + 1)}
		if err := m2.Allreduce(backend.BufferOf(x), backend.BufferOf(x), collective.Sum); err != nil || x[0] != float64(c.Size()*(c.Size()+1)/2) {
			t.Errorf("allreduce on the second communicator: %v, %v", x, err)
		}
		if err := m2.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if mpi.Finalized() || mpi.StateCounters().Finalized != finalizedBefore || mpi.StateCounters().Open != 1 {
			t.Errorf("closing the second backend finalised MPI (%d finalize calls, %d open)", mpi.StateCounters().Finalized, mpi.StateCounters().Open)
		}
		if err := m2.Barrier(); !errors.Is(err, collective.ErrClosed) {
			t.Errorf("Barrier on the closed second backend: %v, want ErrClosed", err)
		}
		if err := c.Barrier(); err != nil {
			t.Errorf("the world after closing the second backend: %v", err)
		}
	})

	t.Run("world mismatch", func(t *testing.T) {
		// MPI is initialised: the check fails before any collective, and
		// neither finalises MPI nor disturbs the open world.
		wrong := topo
		wrong.WorldSize, wrong.LocalWorldSize = topo.WorldSize+1, topo.LocalWorldSize+1
		_, err := mpi.New(wrong, os.Getenv)
		want := fmt.Sprintf("MPI sees a world of %d processes but the %s launcher started %d", c.Size(), topo.Launcher, c.Size()+1)
		if c.Size() == 1 {
			want = fmt.Sprintf("MPI sees a world of 1 process but the %s launcher started 2 (this is rank 0): every process came up as an MPI singleton", topo.Launcher)
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("mpi.New with world size %d: %v\nwant an error containing %q", wrong.WorldSize, err, want)
		}
		if c.Size() > 1 {
			wrong = topo
			wrong.Rank = (topo.Rank + 1) % topo.WorldSize
			if _, err := mpi.New(wrong, os.Getenv); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("MPI says this is rank %d of %d", c.Rank(), c.Size())) {
				t.Errorf("mpi.New with rank %d: %v", wrong.Rank, err)
			}
		}
		if mpi.Finalized() || mpi.StateCounters().Open != 1 {
			t.Errorf("a failed mpi.New finalised MPI or left a communicator open (%d open)", mpi.StateCounters().Open)
		}
		if err := c.Barrier(); err != nil {
			t.Errorf("the world after a failed mpi.New: %v", err)
		}
	})

	t.Run("close", func(t *testing.T) {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := m.Close(); err != nil { // the backend itself is idempotent too
			t.Errorf("second backend Close: %v", err)
		}
		want := 1
		if externallyInitialised {
			want = 0
		}
		if got := mpi.StateCounters().Finalized - finalizedBefore; got != want {
			t.Errorf("MPI_Finalize called %d times, want %d", got, want)
		}
		if mpi.Finalized() != !externallyInitialised {
			t.Errorf("MPI_Finalized = %v after Close", mpi.Finalized())
		}
		if err := c.Barrier(); !errors.Is(err, collective.ErrClosed) {
			t.Errorf("Barrier after Close: %v, want ErrClosed", err)
		}
		x := []float32{1}
		if err := m.Allreduce(backend.BufferOf(x), backend.BufferOf(x), collective.Sum); !errors.Is(err, collective.ErrClosed) {
			t.Errorf("backend Allreduce after Close: %v, want ErrClosed", err)
		}
		if _, err := collective.Init(cfg); err == nil || !strings.Contains(err.Error(), "finalised") {
			t.Errorf("Init after Close: %v, want a 'finalised' error", err)
		}
		if _, err := mpi.New(topo, os.Getenv); err == nil || !strings.Contains(err.Error(), "finalised") {
			t.Errorf("mpi.New after Close: %v, want a 'finalised' error", err)
		}
	})
}

// testMPIErrors: bad arguments handed straight to the backend come back as
// MPI's own error, on one line, and leave the communicator usable.
func testMPIErrors(t *testing.T, c *collective.Comm, m *mpi.Backend) {
	x := []float32{1, 2, 3}
	y := make([]float32, 3*c.Size())
	check := func(what string, err error, call, class string) {
		t.Helper()
		var me *mpi.Error
		switch {
		case !errors.As(err, &me):
			t.Errorf("%s: %v, want an *mpi.Error", what, err)
		case me.Call != call || (class != "" && me.Class != class):
			t.Errorf("%s: %q, want call %s class %s", what, err, call, class)
		case !strings.HasPrefix(err.Error(), call+": "+me.Class+": ") || len(err.Error()) < len(call)+len(me.Class)+10:
			t.Errorf("%s: %q, want %q followed by MPI's text", what, err, call+": "+me.Class+": ")
		case strings.Contains(err.Error(), "\n"):
			t.Errorf("%s: error spans lines: %q", what, err)
		default:
			t.Logf("%s: %v", what, err)
		}
	}
	check("allreduce op 99", m.Allreduce(backend.BufferOf(x), backend.BufferOf(x), collective.Op(99)), "MPI_Allreduce", "MPI_ERR_OP")
	check("allreduce avg (never a backend op)", m.Allreduce(backend.BufferOf(x), backend.BufferOf(y[:3]), collective.Avg), "MPI_Allreduce", "MPI_ERR_OP")
	check("reduce-scatter op 0", m.ReduceScatter(backend.BufferOf(y), backend.BufferOf(x), collective.Op(0)), "MPI_Reduce_scatter_block", "MPI_ERR_OP")
	check("broadcast root = size", m.Broadcast(backend.BufferOf(x), c.Size()), "MPI_Bcast", "MPI_ERR_ROOT")
	check("broadcast root -1", m.Broadcast(backend.BufferOf(x), -1), "MPI_Bcast", "MPI_ERR_ROOT")
	bad := backend.Buffer{Ptr: backend.BufferOf(x).Ptr, Len: 3, Type: collective.DType(9)}
	check("broadcast dtype 9", m.Broadcast(bad, 0), "MPI_Bcast", "MPI_ERR_TYPE")
	check("allreduce dtype 9", m.Allreduce(bad, bad, collective.Sum), "MPI_Allreduce", "")
	check("allgather dtype 9", m.Allgather(bad, backend.Buffer{Ptr: backend.BufferOf(y).Ptr, Len: len(y), Type: collective.DType(9)}), "MPI_Allgather", "MPI_ERR_TYPE")

	// Lengths that would let MPI run past a buffer are refused locally.
	for what, err := range map[string]error{
		"allreduce lengths":  m.Allreduce(backend.BufferOf(x), backend.BufferOf(y[:2]), collective.Sum),
		"allreduce types":    m.Allreduce(backend.BufferOf(x), backend.BufferOf([]float64{1, 2, 3}), collective.Sum),
		"allgather lengths":  m.Allgather(backend.BufferOf(x), backend.BufferOf(y[:len(y)-1])),
		"reducescatter lens": m.ReduceScatter(backend.BufferOf(y[:len(y)-1]), backend.BufferOf(x), collective.Sum),
	} {
		var me *mpi.Error
		if err == nil || errors.As(err, &me) {
			t.Errorf("%s: %v, want a local error", what, err)
		}
	}
	// Empty buffers (the dispatcher refuses them) do not crash the backend.
	e32 := backend.Buffer{Type: collective.Float32}
	for what, err := range map[string]error{
		"allreduce in place": m.Allreduce(e32, e32, collective.Sum),
		"allreduce":          m.Allreduce(e32, backend.Buffer{Type: collective.Float32}, collective.Max),
		"broadcast":          m.Broadcast(e32, 0),
		"allgather":          m.Allgather(e32, e32),
		"reducescatter":      m.ReduceScatter(e32, e32, collective.Min),
	} {
		if err != nil {
			t.Errorf("empty %s: %v", what, err)
		}
	}
	// The communicator still works.
	v := []float64{float64(c.Rank())}
	if err := collective.Allreduce(c, v, v, collective.Sum); err != nil || v[0] != float64(c.Size()*(c.Size()-1)/2) {
		t.Errorf("allreduce after the errors: %v, %v", v, err)
	}
}

func testMPIOps(t *testing.T, c *collective.Comm) {
	testMPIOpsT[float32](t, c)
	testMPIOpsT[float64](t, c)
}

func testMPIOpsT[T collective.Float](t *testing.T, c *collective.Comm) {
	n, me := c.Size(), c.Rank()
	typ := backend.BufferOf([]T{0}).Type
	for _, l := range []int{1, 13, 4099} {
		for _, op := range []collective.Op{collective.Sum, collective.Avg, collective.Max, collective.Min} {
			for _, inPlace := range []bool{false, true} {
				what := fmt.Sprintf("allreduce %v %v len %d in place %v", typ, op, l, inPlace)
				send := make([]T, l)
				for i := range send {
					send[i] = T(conform.Input(me, i))
				}
				recv := send
				if !inPlace {
					recv = make([]T, l)
				}
				if err := collective.Allreduce(c, send, recv, op); err != nil {
					t.Errorf("%s: %v", what, err)
					continue
				}
				if err := conform.Compare(what, recv, func(i int) T { return conform.Want[T](op, n, i) }); err != nil {
					t.Error(err)
				}
				if err := identical(c, recv); err != nil {
					t.Errorf("%s: %v", what, err)
				}
			}
		}
		for root := 0; root < n; root++ {
			buf := make([]T, l)
			if me == root {
				for i := range buf {
					buf[i] = T(conform.Input(root, i))
				}
			}
			if err := collective.Broadcast(c, buf, root); err != nil {
				t.Errorf("broadcast %v len %d root %d: %v", typ, l, root, err)
				continue
			}
			if err := conform.Compare(fmt.Sprintf("broadcast %v len %d root %d", typ, l, root), buf, func(i int) T { return T(conform.Input(root, i)) }); err != nil {
				t.Error(err)
			}
		}
	}
	for _, k := range []int{1, 5, 1000} {
		send := make([]T, k)
		for i := range send {
			send[i] = T(conform.Input(me, i))
		}
		all := make([]T, n*k)
		if err := collective.Allgather(c, send, all); err != nil {
			t.Errorf("allgather %v block %d: %v", typ, k, err)
		} else {
			if err := conform.Compare(fmt.Sprintf("allgather %v block %d", typ, k), all, func(i int) T { return T(conform.Input(i/k, i%k)) }); err != nil {
				t.Error(err)
			}
		}
		for _, op := range []collective.Op{collective.Sum, collective.Avg, collective.Max, collective.Min} {
			big := make([]T, n*k)
			for i := range big {
				big[i] = T(conform.Input(me, i))
			}
			mine := make([]T, k)
			if err := collective.ReduceScatter(c, big, mine, op); err != nil {
				t.Errorf("reducescatter %v %v block %d: %v", typ, op, k, err)
				continue
			}
			if err := conform.Compare(fmt.Sprintf("reducescatter %v %v block %d", typ, op, k), mine, func(i int) T { return conform.Want[T](op, n, me*k+i) }); err != nil {
				t.Error(err)
			}
		}
	}
	// Inexact sums of random values (different on every rank) must still
	// come out bit-identical everywhere, also at sizes where MPI switches to
	// its large-message algorithms.
	rng := rand.New(rand.NewPCG(uint64(me), 42))
	for _, l := range []int{3, 1000, 1 << 18} {
		s := make([]T, l)
		for i := range s {
			s[i] = T(rng.NormFloat64() * 1e3)
		}
		if err := collective.Allreduce(c, s, s, collective.Sum); err != nil {
			t.Errorf("allreduce random len %d: %v", l, err)
		} else if err := identical(c, s); err != nil {
			t.Errorf("allreduce %v sum of random values, len %d: %v", typ, l, err)
		}
	}
	if err := c.Barrier(); err != nil {
		t.Errorf("barrier: %v", err)
	}
}

// testMPIChunking lowers the per-call count limit (INT_MAX in production) so
// that allreduce (blocking and idle) and broadcast run in several MPI calls, and allgather and
// reduce-scatter refuse buffers above it.
func testMPIChunking(t *testing.T, c *collective.Comm, m *mpi.Backend) {
	defer mpi.SetMaxCount(5)()
	n, me := c.Size(), c.Rank()
	for _, idle := range []bool{false, true} {
		for _, inPlace := range []bool{false, true} {
			send := make([]float64, 23)
			for i := range send {
				send[i] = conform.Input(me, i)
			}
			recv := send
			if !inPlace {
				recv = make([]float64, len(send))
			}
			reduce := collective.Allreduce[float64]
			if idle {
				reduce = collective.AllreduceIdle[float64]
			}
			if err := reduce(c, send, recv, collective.Max); err != nil {
				t.Errorf("chunked allreduce (idle %v): %v", idle, err)
			}
			if err := conform.Compare(fmt.Sprintf("chunked allreduce in place %v idle %v", inPlace, idle), recv, func(i int) float64 { return conform.Want[float64](collective.Max, n, i) }); err != nil {
				t.Error(err)
			}
		}
	}
	f := make([]float32, 21)
	if me == n-1 {
		for i := range f {
			f[i] = float32(conform.Input(n-1, i))
		}
	}
	if err := collective.Broadcast(c, f, n-1); err != nil {
		t.Errorf("chunked broadcast: %v", err)
	}
	if err := conform.Compare("chunked broadcast", f, func(i int) float32 { return float32(conform.Input(n-1, i)) }); err != nil {
		t.Error(err)
	}

	// Allgather and reduce-scatter: the whole buffer must fit in one call.
	mpi.SetMaxCount(int64(5 * n)) // restored by the defer above
	ok, big := make([]float32, 5), make([]float32, 6)
	if err := collective.Allgather(c, ok, make([]float32, 5*n)); err != nil {
		t.Errorf("allgather of 5 × %d with a limit of %d: %v", n, 5*n, err)
	}
	if err := collective.ReduceScatter(c, make([]float32, 5*n), ok, collective.Sum); err != nil {
		t.Errorf("reducescatter of 5 × %d with a limit of %d: %v", n, 5*n, err)
	}
	want := fmt.Sprintf("%d elements (6 per rank) exceed MPI's limit of %d per call", 6*n, 5*n)
	if err := collective.Allgather(c, big, make([]float32, 6*n)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("allgather of 6 × %d with a limit of %d: %v, want %q", n, 5*n, err, want)
	}
	if err := collective.ReduceScatter(c, make([]float32, 6*n), big, collective.Sum); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("reducescatter of 6 × %d with a limit of %d: %v, want %q", n, 5*n, err, want)
	}
	if err := m.Barrier(); err != nil {
		t.Errorf("barrier: %v", err)
	}
}

// testMPIGoroutines: concurrent callers are serialised (MPI_THREAD_SERIALIZED
// on whatever OS thread each goroutine runs). Every call has the same shape
// and data, so however the ranks pair them up the result is the same.
func testMPIGoroutines(t *testing.T, c *collective.Comm) {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	want := float32(c.Size() * (c.Size() + 1) / 2)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				x := make([]float32, 8)
				for j := range x {
					x[j] = float32(c.Rank() + 1)
				}
				if err := collective.Allreduce(c, x, x, collective.Sum); err != nil {
					errs <- err
					return
				}
				if x[0] != want || x[7] != want {
					errs <- fmt.Errorf("goroutine allreduce: %v, want %v", x, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// testMPIWorker checks the hand-over threshold on real calls (none below
// it, one at it, allgather counting every rank's block), then runs the
// collectives again with every call handed to the worker thread (threshold
// 0), and none with BATCHKIT_MPI_HANDOFF=0.
func testMPIWorker(t *testing.T, c *collective.Comm, m *mpi.Backend) {
	if want, err := mpi.HandoffAt(os.Getenv); err != nil || m.HandoffThreshold() != want {
		t.Errorf("handoffAt = %d with BATCHKIT_MPI_HANDOFF=%q, want %d (%v)", m.HandoffThreshold(), os.Getenv("BATCHKIT_MPI_HANDOFF"), want, err)
	}
	if m.HandoffThreshold() == mpi.HandoffNever {
		t.Skip("BATCHKIT_MPI_HANDOFF=0")
	}
	defer m.SetHandoffThreshold(m.HandoffThreshold())
	const at = 4 << 20 // above every call of testMPIOps (2 MiB at most)
	m.SetHandoffThreshold(at)
	before := handoffs()
	testMPIOps(t, c)
	if n := handoffs() - before; n != 0 {
		t.Errorf("%d calls under %d bytes went to the worker, want none", n, at)
	}
	big := make([]float32, at/4)
	for _, tc := range []struct {
		name string
		call func() error
		want int
	}{
		{"broadcast of the threshold's bytes", func() error { return collective.Broadcast(c, big, 0) }, 1},
		{"broadcast of one element less", func() error { return collective.Broadcast(c, big[:len(big)-1], 0) }, 0},
		// A call beside compute waits on the worker whatever its size: the
		// goroutine parks and its P goes to the compute.
		{"idle allreduce of one element", func() error { return collective.AllreduceIdle(c, big[:1], big[:1], collective.Sum) }, 1},
		{"allgather of the threshold's bytes, counted over every rank", func() error {
			return collective.Allgather(c, make([]float32, len(big)/c.Size()), big[:len(big)/c.Size()*c.Size()])
		}, boolInt(at%(4*c.Size()) == 0)},
	} {
		before := handoffs()
		if err := tc.call(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if n := handoffs() - before; n != tc.want {
			t.Errorf("%s: %d hand-overs, want %d", tc.name, n, tc.want)
		}
	}

	m.SetHandoffThreshold(0)
	before = handoffs()
	x := []float32{float32(c.Rank() + 1), 1}
	if err := collective.Allreduce(c, x, x, collective.Sum); err != nil || x[0] != float32(c.Size()*(c.Size()+1)/2) || x[1] != float32(c.Size()) {
		t.Errorf("allreduce on the worker: %v, %v", x, err)
	}
	if n := handoffs() - before; n != 1 {
		t.Fatalf("one allreduce with threshold 0: %d handoffs, want 1", n) // every rank alike
	}
	t.Run("ops", func(t *testing.T) { testMPIOps(t, c) })
	t.Run("errors", func(t *testing.T) { testMPIErrors(t, c, m) })
	t.Run("chunking", func(t *testing.T) { testMPIChunking(t, c, m) })
	t.Run("goroutines", func(t *testing.T) { testMPIGoroutines(t, c) })
	t.Run("garbage collection", func(t *testing.T) { testMPIWorkerGC(t, c) })
	if n := handoffs() - before; n < 400 {
		t.Errorf("%d handoffs, want every call (400 from the goroutines alone)", n)
	}
	t.Logf("%d calls on the worker thread", handoffs()-before)

	// cLoop, BenchmarkMPIOverhead's reference, makes its call iters times
	// on the worker: an in-place sum of ones three times over is size³.
	y := backend.BufferOf([]float64{1})
	d, err := m.CLoopAllreduce(y, y, collective.Sum, 1, 3)
	if got, want := *(*float64)(y.Ptr), float64(c.Size()*c.Size()*c.Size()); err != nil || got != want || d <= 0 {
		t.Errorf("cLoop of 3 in-place sums: %v in %v, %v; want %v", got, d, err, want)
	}

	// Never (BATCHKIT_MPI_HANDOFF=0): no call goes.
	m.SetHandoffThreshold(mpi.HandoffNever)
	before = handoffs()
	if err := collective.Allreduce(c, x, x, collective.Sum); err != nil {
		t.Error(err)
	}
	if n := handoffs() - before; n != 0 {
		t.Errorf("with handoff off: %d handoffs", n)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// testMPIWorkerGC hands buffers to the worker that the collector then
// frees, and checks the next calls' results. The hazard behind it, Go
// storing a buffer's pointer into the worker's C memory (the GC's write
// barrier then saw a freed buffer in the slot: "found bad pointer in Go
// heap", once in CI), is ruled out at compile time in the shared
// internal/handoff/handoff.go: the slots are integers.
func testMPIWorkerGC(t *testing.T, c *collective.Comm) {
	want := float64(c.Size() * (c.Size() + 1) / 2)
	check := func(what string, x []float64) {
		t.Helper()
		x[0] = float64(c.Rank() + 1)
		if err := collective.Allreduce(c, x, x, collective.Sum); err != nil || x[0] != want {
			t.Fatalf("%s: allreduce on the worker = %v, %v; want %v", what, x[0], err, want)
		}
	}
	for i := range 10 {
		check("a large buffer", make([]float64, 64<<10)) // 512 KiB, a span of its own
		runtime.GC()
		runtime.GC() // the buffer is garbage: its span is free
		check(fmt.Sprintf("round %d, after the collection", i), make([]float64, 1))
	}
}

// An MPI library's abort() ends the process by SIGABRT, with the library's
// own words and nothing from Go (no goroutine dump, no status 2), once the
// program has called mpi.SetupProcess. The test runs itself again as a
// singleton that initialises MPI and aborts.
func TestMPIAbortLikeC(t *testing.T) {
	if os.Getenv("BATCHKIT_TEST_ABORT") == "1" {
		topo := topology.Topology{Launcher: topology.Single, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1}
		if _, err := collective.Init(collective.Config{Topology: topo, Backend: collective.MPI}); err != nil {
			fmt.Fprintln(os.Stderr, "init:", err)
			os.Exit(3)
		}
		mpi.SetupProcess(os.Getenv) // what the program does at its edge
		fmt.Fprintln(os.Stderr, "the library's last words")
		mpi.Abort()
		os.Exit(4) // not reached
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestMPIAbortLikeC$")
	// A singleton: none of the launcher's variables.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "BATCHKIT_TEST_ABORT=1",
		"PMIX_MCA_psec=native", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v, want it killed by SIGABRT\n%s", err, stderr.String())
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGABRT {
		t.Errorf("child ended with %v (exit status %d), want killed by SIGABRT", ee, ws.ExitStatus())
	}
	out := stderr.String()
	if !strings.Contains(out, "the library's last words") {
		t.Errorf("child's stderr lacks its own message:\n%s", out)
	}
	for _, goDump := range []string{"goroutine ", "SIGABRT: abort", "signal arrived during cgo execution"} {
		if strings.Contains(out, goDump) {
			t.Errorf("child's stderr has Go's crash report (%q):\n%s", goDump, out)
		}
	}
}

// identical checks that every rank holds bit-identical s.
func identical[T collective.Float](c *collective.Comm, s []T) error {
	all := make([]float64, 4*c.Size())
	if err := collective.Allgather(c, conform.HashParts(s), all); err != nil {
		return err
	}
	return conform.SameEverywhere(all)
}

// handoffs is how many hand-overs to the worker thread this process made.
func handoffs() int {
	return mpi.StateCounters().Handoffs
}
