//go:build (mpi || mpich) && !(mpi && mpich)

package collective

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/batchkit/batchkit/detect"
)

// TestBenchMPILoop is trainer/bench's allreduce measurement (float32, out of
// place, Sum; the same schedule and timing, but without bench's 300 ms
// settle before the first size, so its first size includes start-up) run through this package's API
// on the MPI backend, printing the JSON lines of reference/mpi_bench.c with
// backend "go-openmpi" or "go-mpich": the two compare 1:1 without the bench
// command. It runs only when asked, under a launcher:
//
//	BATCHKIT_MPI_BENCH=1 mpirun.openmpi --allow-run-as-root --oversubscribe -n 2 -x BATCHKIT_MPI_BENCH \
//	    /tmp/coll_ompi.test -test.run TestBenchMPILoop
//
// BATCHKIT_MPI_BENCH_MIN, _MAX (bytes, default 8 and 64 MiB) and _ITERS
// (timed iterations, warm-up max(1, N/10)) narrow it. It finalises MPI.
// (Named so that -test.run TestMPI does not select it.)
func TestBenchMPILoop(t *testing.T) {
	if os.Getenv("BATCHKIT_MPI_BENCH") == "" {
		t.Skip("set BATCHKIT_MPI_BENCH=1 and run under an MPI launcher")
	}
	if mpiFinalized() {
		t.Skip("MPI was already finalised in this process")
	}
	env := func(name string, def int) int {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s=%q: %v", name, v, err)
			}
			return n
		}
		return def
	}
	minBytes, maxBytes, itersFlag := env("BATCHKIT_MPI_BENCH_MIN", 8), env("BATCHKIT_MPI_BENCH_MAX", 64<<20), env("BATCHKIT_MPI_BENCH_ITERS", 0)

	topo, err := detect.Detect(os.Getenv, detect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Init(Config{Topology: topo, Backend: MPI, Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
			if err := Allreduce(c, s, r, Sum); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Barrier(); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		for range iters {
			if err := Allreduce(c, s, r, Sum); err != nil {
				t.Fatal(err)
			}
		}
		mine := time.Since(t0).Seconds() / float64(iters)
		sum, ext := []float64{mine}, []float64{mine, -mine}
		if err := Allreduce(c, sum, sum, Sum); err != nil {
			t.Fatal(err)
		}
		if err := Allreduce(c, ext, ext, Max); err != nil {
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
				MPIBuilt, n, bytes, count, iters, warmup, avg*1e6, -ext[1]*1e6, ext[0]*1e6, algbw, busbw)
		}
	}
}

// BenchmarkMPIAllreduce8B is the cost of one 8-byte allreduce through the
// Comm API in a world of one (no launcher): the Go-side overhead per call
// (dispatcher, lock, cgo) on top of MPI's own. Compare with
// `reference/mpi_bench --max-bytes 8` run the same way.
func BenchmarkMPIAllreduce8B(b *testing.B) {
	if mpiFinalized() {
		b.Skip("MPI was already finalised in this process")
	}
	topo, err := detect.Detect(os.Getenv, detect.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if topo.WorldSize != 1 {
		b.Skip("benchmarks run b.N iterations, which differs between ranks: run without a launcher")
	}
	c, err := Init(Config{Topology: topo, Backend: MPI})
	if err != nil {
		b.Fatal(err)
	}
	send, recv := []float32{1, 2}, make([]float32, 2)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := Allreduce(c, send, recv, Sum); err != nil {
			b.Fatal(err)
		}
	}
}
