//go:build (mpi || mpich) && !(mpi && mpich)

package mpi_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/trainer/collective"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/mpi"
)

// The measurements below run under an MPI launcher, every rank the same
// schedule, so they ignore b.N and run once per launch: -test.benchtime 1x
// (a second run would find MPI finalised), and -test.run '^$' (TestMPI
// finalises MPI too). They print JSON lines on rank 0 and finalise MPI.

// BenchmarkMPILoop is trainer/bench's allreduce measurement (float32, out of
// place, Sum; the same schedule and timing, but without bench's 300 ms
// settle before the first size, so its first size includes start-up) run
// through this package's API on the MPI backend, printing the JSON lines of
// reference/mpi_bench.c with backend "go-openmpi" or "go-mpich": the two
// compare 1:1 without the bench command.
//
//	mpirun.openmpi --allow-run-as-root --oversubscribe -n 2 \
//	    /tmp/coll_ompi.test -test.run '^$' -test.bench '^BenchmarkMPILoop$' -test.benchtime 1x
//
// BATCHKIT_MPI_BENCH_MIN, _MAX (bytes, default 8 and 64 MiB) and _ITERS
// (timed iterations, warm-up max(1, N/10)) narrow it.
func BenchmarkMPILoop(t *testing.B) { // t: b is the message size below
	c, minBytes, maxBytes := mpiMeasureWorld(t)
	defer c.Close()
	itersFlag := envCount(t, "BATCHKIT_MPI_BENCH_ITERS", 0)
	n := c.Size()
	send, recv := make([]float32, maxBytes/4), make([]float32, maxBytes/4)
	for b := minBytes; b <= maxBytes; b *= 2 {
		bytes := b / 4 * 4
		if bytes == 0 {
			continue
		}
		count := bytes / 4
		warmup, iters := 100, 1000
		switch {
		case itersFlag > 0:
			warmup, iters = max(1, itersFlag/10), itersFlag
		case bytes <= 64<<10:
		case bytes <= 1<<20:
			warmup, iters = 20, 200
		case bytes <= 16<<20:
			warmup, iters = 5, 50
		default:
			warmup, iters = 2, 20
		}
		s, r := send[:count], recv[:count]
		for i := range s {
			s[i] = float32((i%1024 + 1) * (c.Rank() + 1))
		}
		for range warmup {
			if err := collective.Allreduce(c, s, r, collective.Sum); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Barrier(); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		for range iters {
			if err := collective.Allreduce(c, s, r, collective.Sum); err != nil {
				t.Fatal(err)
			}
		}
		mine := time.Since(t0).Seconds() / float64(iters)
		sum, ext := []float64{mine}, []float64{mine, -mine}
		if err := collective.Allreduce(c, sum, sum, collective.Sum); err != nil {
			t.Fatal(err)
		}
		if err := collective.Allreduce(c, ext, ext, collective.Max); err != nil {
			t.Fatal(err)
		}
		avg := sum[0] / float64(n)
		algbw := float64(bytes) / avg / 1e9
		busbw := algbw
		if n > 1 {
			busbw = algbw * 2 * float64(n-1) / float64(n)
		}
		if c.Rank() == 0 {
			fmt.Printf("{\"op\":\"allreduce\",\"backend\":\"go-%s\",\"dtype\":\"float32\",\"ranks\":%d,\"bytes\":%d,\"count\":%d,"+
				"\"iters\":%d,\"warmup\":%d,\"avg_us\":%.3f,\"min_us\":%.3f,\"max_us\":%.3f,\"algbw_gbs\":%.6f,\"busbw_gbs\":%.6f}\n",
				collective.MPIBuilt, n, bytes, count, iters, warmup, avg*1e6, -ext[1]*1e6, ext[0]*1e6, algbw, busbw)
		}
	}
}

// BenchmarkMPIAllreduce8B is the cost of one 8-byte allreduce through the
// Comm API in a world of one (no launcher): the Go-side overhead per call
// (dispatcher, lock, cgo) on top of MPI's own. Compare with
// `reference/mpi_bench --max-bytes 8` run the same way.
func BenchmarkMPIAllreduce8B(b *testing.B) {
	if mpi.Finalized() {
		b.Skip("MPI was already finalised in this process")
	}
	topo, err := detect.Detect(os.Getenv, detect.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if topo.WorldSize != 1 {
		b.Skip("benchmarks run b.N iterations, which differs between ranks: run without a launcher")
	}
	c, err := collective.Init(collective.Config{Topology: topo, Backend: collective.MPI})
	if err != nil {
		b.Fatal(err)
	}
	send, recv := []float32{1, 2}, make([]float32, 2)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := collective.Allreduce(c, send, recv, collective.Sum); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMPIOverhead measures what the Go layer costs over MPI inside
// one process, where separate programs cannot: this machine's timings
// change by up to 2× between processes. Per size (float32 allreduce, out
// of place, sum), each round times three windows of the same calls on the
// same buffers: looped in C on the worker thread (cLoop: the goroutine
// parked, as for a C program), one by one through Allreduce, and C again,
// each after an untimed window of the same; a window's time is the slowest
// rank's. Rank 0 prints one JSON line per size (overhead: Go's busbw
// against C's and the C windows against each other as an A/A control,
// medians with 95 % intervals, and every round, so that make bench can
// pool launches with BenchmarkMPIOverheadPool). The method and its history
// are in docs/performance.md.
//
//	mpirun.openmpi --allow-run-as-root --oversubscribe -n 2 -x BATCHKIT_MPI_OVERHEAD_ROUNDS \
//	    /tmp/coll_ompi.test -test.run '^$' -test.bench '^BenchmarkMPIOverhead$' -test.benchtime 1x
//
// BATCHKIT_MPI_BENCH_MIN and _MAX (bytes, default 8 and 64 MiB) narrow the
// sizes; a size runs BATCHKIT_MPI_OVERHEAD_ROUNDS rounds (default 21), then
// more until Go/C's interval is 1.5 % wide or BATCHKIT_MPI_OVERHEAD_BUDGET
// (default 20s; 0 stops at the minimum) is spent. The stopping rule reads
// only the slowest-rank times every rank holds, so the ranks stop together.
func BenchmarkMPIOverhead(t *testing.B) { // t: b is the message size below
	c, minBytes, maxBytes := mpiMeasureWorld(t)
	defer c.Close()
	minRounds := max(1, envCount(t, "BATCHKIT_MPI_OVERHEAD_ROUNDS", 21))
	budget := envDuration(t, "BATCHKIT_MPI_OVERHEAD_BUDGET", 20*time.Second)
	const (
		window    = 50 * time.Millisecond
		maxRounds = 1001
	)
	// narrow: the median's 95 % interval is at most 1.5 % of it wide.
	narrow := func(v []float64) bool {
		lo, med, hi := medianCI(v)
		return hi-lo <= 0.015*med
	}
	m := mpi.Newest() // the backend under c
	n := c.Size()
	send, recv := make([]float32, maxBytes/4), make([]float32, maxBytes/4)
	for b := minBytes; b <= maxBytes; b *= 2 {
		count := b / 4
		if count == 0 {
			continue
		}
		s, r := send[:count], recv[:count]
		for i := range s {
			s[i] = float32((i%1024 + 1) * (c.Rank() + 1))
		}
		sb, rb := backend.BufferOf(s), backend.BufferOf(r)
		goLoop := func(iters int) (time.Duration, error) {
			t0 := time.Now()
			for range iters {
				if err := collective.Allreduce(c, s, r, collective.Sum); err != nil {
					return 0, err
				}
			}
			return time.Since(t0), nil
		}
		cLoop := func(iters int) (time.Duration, error) {
			return m.CLoopAllreduce(sb, rb, collective.Sum, 0, iters)
		}
		slowest := func(d ...time.Duration) ([]float64, error) {
			v := make([]float64, len(d))
			for i, x := range d {
				v[i] = x.Seconds()
			}
			return v, collective.Allreduce(c, v, v, collective.Max)
		}

		// Warm both paths up, then size the windows from the Go path's speed
		// over at least a fifth of a window: timed over 10 calls, one slow
		// moment made 64 KiB windows of 4 ms, too short to get past the
		// runtime's 20 µs polling after each C window (0.85× C).
		if _, err := goLoop(10); err != nil {
			t.Fatal(err)
		}
		if _, err := cLoop(10); err != nil {
			t.Fatal(err)
		}
		calls, per := 10, 0.0
		for ; ; calls *= 2 {
			d, err := goLoop(calls)
			if err != nil {
				t.Fatal(err)
			}
			v, err := slowest(d)
			if err != nil {
				t.Fatal(err)
			}
			if per = v[0] / float64(calls); v[0] >= window.Seconds()/5 {
				break
			}
		}
		iters := max(5, int(window.Seconds()/per))

		var goVsC, aa, cTimes, goTimes []float64
		spent := 0.0 // seconds, the slowest rank's: the same on every rank
		resized := 0 // rounds dropped for short windows
		goCalls, goHandoffs := 0, 0
		for {
			var w [3]time.Duration
			for k := range w {
				if err := c.Barrier(); err != nil {
					t.Fatal(err)
				}
				loop := cLoop
				if k == 1 {
					loop = goLoop
				}
				// Untimed first: the switch between parking (C) and calling
				// (Go) changes what the runtime's threads do for a while.
				if _, err := loop(iters); err != nil {
					t.Fatal(err)
				}
				h := handoffs()
				d, err := loop(iters)
				if err != nil {
					t.Fatal(err)
				}
				w[k] = d
				if k == 1 {
					goCalls, goHandoffs = goCalls+iters, goHandoffs+handoffs()-h
				}
			}
			v, err := slowest(w[:]...)
			if err != nil {
				t.Fatal(err)
			}
			if v[0] <= 0 || v[1] <= 0 || v[2] <= 0 {
				t.Fatalf("%d bytes: a window of %d calls took %v", b, iters, v)
			}
			spent += 2 * (v[0] + v[1] + v[2]) // each after an untimed window like it
			// Windows under half the length: the sizing above caught a slow
			// moment, or the calls got faster since. The first ~20 ms of Go
			// calls after a C window pay for sysmon's polling after the park,
			// so short windows measure that, not the calls (64 KiB to 1 MiB
			// windows of 5-18 ms: 0.85-0.98× C). Resize, and drop the round:
			// every rank sees the same times, so all of them do. Each resize
			// at least doubles the windows, so this ends.
			if mean := (v[0] + v[1] + v[2]) / 3; mean < window.Seconds()/2 {
				iters = max(iters+1, int(float64(iters)*window.Seconds()/mean))
				resized++
				continue
			}
			goVsC = append(goVsC, (v[0]+v[2])/2/v[1])
			aa = append(aa, v[2]/v[0])
			cTimes = append(cTimes, (v[0]+v[2])/2/float64(iters)*1e6)
			goTimes = append(goTimes, v[1]/float64(iters)*1e6)
			if r := len(goVsC); r >= maxRounds || r >= minRounds && (spent >= budget.Seconds() || narrow(goVsC)) {
				break
			}
		}
		// The loops did arithmetic, not just traffic: every rank holds the sum.
		sum := float32(n * (n + 1) / 2)
		for i, x := range r {
			if want := float32(i%1024+1) * sum; x != want {
				t.Fatalf("%d bytes: recv[%d] = %v, want %v", b, i, x, want)
			}
		}
		if c.Rank() == 0 {
			o := launchOverhead(b, n, collective.MPIBuilt, iters, cTimes, goTimes, goVsC, aa)
			o.Resized, o.GoCalls, o.GoHandoffs = resized, goCalls, goHandoffs
			o.Procs, o.MPIVersion = runtime.GOMAXPROCS(0), mpi.LibraryVersion()
			line, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%s\n", line)
		}
	}
}

// TestMPIOverheadSetsUpProcess: BenchmarkMPIOverhead measures in the
// process a batchkit rank runs in. Started on one core, as Open MPI binds
// each rank by default, Go picks GOMAXPROCS 1; batchkit raises it to 2
// (collective.SetupProcess) and the measurement must too: at 1 it measured
// Go's 256 KiB-4 MiB calls at 0.66-0.94× C, at 2 0.97-1.03× (2026-12-06).
// The test runs the benchmark again as a singleton under taskset -c 0 and
// reads the GOMAXPROCS its result line reports.
func TestMPIOverheadSetsUpProcess(t *testing.T) {
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Skip("needs taskset (util-linux) to start the benchmark on one core")
	}
	cmd := exec.Command(taskset, "-c", "0", os.Args[0], "-test.run", "^$", "-test.bench", "^BenchmarkMPIOverhead$", "-test.benchtime", "1x")
	// A singleton with none of the launcher's variables, and no GOMAXPROCS.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"BATCHKIT_MPI_BENCH_MIN=8", "BATCHKIT_MPI_BENCH_MAX=8", "BATCHKIT_MPI_OVERHEAD_ROUNDS=1", "BATCHKIT_MPI_OVERHEAD_BUDGET=0",
		"PMIX_MCA_psec=native", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	var got []int
	for _, line := range strings.Split(string(out), "\n") {
		var o overhead
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &o) == nil {
			got = append(got, o.Procs)
		}
	}
	if len(got) != 1 || got[0] != 2 {
		t.Errorf("GOMAXPROCS of the result lines on one core: %v, want [2] (batchkit's, collective.SetupProcess)\n%s", got, out)
	}
}

// mpiMeasureWorld starts the measurements above: it skips them unless run
// once per launch (every rank must make the same calls), reads the size
// range (BATCHKIT_MPI_BENCH_MIN and _MAX, default 8 B and 64 MiB) and joins
// the MPI world the test binary was launched in.
func mpiMeasureWorld(b *testing.B) (c *collective.Comm, minBytes, maxBytes int) {
	b.Helper()
	benchOnce(b)
	if mpi.Finalized() {
		b.Skip("MPI was already finalised in this process")
	}
	minBytes, maxBytes = max(1, envCount(b, "BATCHKIT_MPI_BENCH_MIN", 8)), envCount(b, "BATCHKIT_MPI_BENCH_MAX", 64<<20)
	topo, err := detect.Detect(os.Getenv, detect.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if c, err = collective.Init(collective.Config{Topology: topo, Backend: collective.MPI, Getenv: os.Getenv}); err != nil {
		b.Fatal(err)
	}
	// What cmd/batchkit does once Init picks MPI, so that the measurement
	// sees the process a batchkit rank runs in. Without it a rank Open MPI
	// binds to one core ran at GOMAXPROCS 1, and Go's calls of 256 KiB to
	// 4 MiB took up to 1.5× C's time (docs/performance.md, 2026-12-06).
	collective.SetupProcess(c, os.Getenv)
	return c, minBytes, maxBytes
}

// envCount reads a non-negative integer from the environment (def if unset).
func envCount(t testing.TB, name string, def int) int {
	t.Helper()
	return envValue(t, name, def, strconv.Atoi, "a non-negative integer")
}

// envDuration reads a non-negative duration from the environment (def if
// unset).
func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	t.Helper()
	return envValue(t, name, def, time.ParseDuration, "a non-negative duration such as 10s")
}

// envValue reads name with parse, failing the test on a value parse rejects
// or that is negative.
func envValue[T int | time.Duration](t testing.TB, name string, def T, parse func(string) (T, error), want string) T {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	x, err := parse(v)
	if err != nil || x < 0 {
		t.Fatalf("%s=%q: want %s", name, v, want)
	}
	return x
}
