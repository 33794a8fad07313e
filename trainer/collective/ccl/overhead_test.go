//go:build ccl

package ccl

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/tcp"
)

// BenchmarkCCLOverhead measures, inside one process a rank, what the Go
// backend costs over oneCCL's C++ API, where separate programs cannot: this
// machine's timings move by more between launches than the gap. Per size
// (float32 allreduce, sum, out of place, the same buffers), each round
// times five windows of the same number of calls, in an order that rotates
// every round: the C++ reference's loop (ccl::allreduce(...).wait(), as
// reference/ccl_bench.cpp; "ref"), the shim's direct path looped in C++
// ("shim": what bkccl_direct does for each Go call), a Go loop of
// bkccl_direct calls and nothing else ("cgo": the cost of one cgo call a
// collective), the Go backend's Allreduce one call at a time ("go"), and
// the reference again ("ref2", the A/A control). Each is preceded by an
// untimed window of the same; a window's time is the slowest rank's. Rank
// 0 prints one JSON line per size: each window's median µs per call, and
// the medians over rounds of shim/ref, cgo/ref, go/ref and ref2/ref with
// their lowest and highest round.
//
//	make build-ccl; go test -c -tags ccl -o /tmp/ccl.test ./trainer/collective/ccl
//	bin/batchkit run -n 2 -- /tmp/ccl.test -test.run '^$' -test.bench '^BenchmarkCCLOverhead$' -test.benchtime 1x
//
// BATCHKIT_CCL_OVERHEAD_SIZES (bytes, comma-separated; default 8, 1 KiB,
// 64 KiB, 256 KiB and 1 MiB) and BATCHKIT_CCL_OVERHEAD_ROUNDS (default
// 16) change the schedule.
func BenchmarkCCLOverhead(t *testing.B) {
	b := overheadWorld(t)
	defer b.Close()
	sizes := []int{8, 1 << 10, 64 << 10, 256 << 10, 1 << 20}
	if v := os.Getenv("BATCHKIT_CCL_OVERHEAD_SIZES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 4 {
				t.Fatalf("BATCHKIT_CCL_OVERHEAD_SIZES=%s: want byte counts of 4 or more", v)
			}
			sizes = append(sizes, n)
		}
	}
	rounds := 16
	if v := os.Getenv("BATCHKIT_CCL_OVERHEAD_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BATCHKIT_CCL_OVERHEAD_ROUNDS=%s: want a number", v)
		}
		rounds = n
	}
	const window = 20 * time.Millisecond
	maxCount := slices.Max(sizes) / 4
	send, recv := make([]float32, maxCount), make([]float32, maxCount)
	for _, bytes := range sizes {
		count := bytes / 4
		s, r := send[:count], recv[:count]
		for i := range s {
			s[i] = float32((i%1024 + 1) * (b.rank + 1))
		}
		sb, rb := backend.BufferOf(s), backend.BufferOf(r)
		paths := map[string]func(iters int) (time.Duration, error){
			"ref":  func(iters int) (time.Duration, error) { return b.cLoop(loopRef, sb, rb, iters) },
			"shim": func(iters int) (time.Duration, error) { return b.cLoop(loopShim, sb, rb, iters) },
			"cgo":  func(iters int) (time.Duration, error) { return b.rawLoop(sb, rb, iters) },
			"go": func(iters int) (time.Duration, error) {
				t0 := time.Now()
				for range iters {
					if err := b.Allreduce(sb, rb, backend.Sum); err != nil {
						return 0, err
					}
				}
				return time.Since(t0), nil
			},
		}
		paths["ref2"] = paths["ref"]
		// The window's calls: from the reference's speed, the median of 5
		// runs of 50 calls, the slowest rank's. Not their best: on a
		// loaded machine oneCCL's calls take one of two times, the slow
		// one ~10x the fast (a peer descheduled while the other spins),
		// and windows sized on a fast moment ran for seconds: a launch of
		// 7 sizes took over 10 minutes (2026-12-06, load ~10). One slow
		// run of the 5 still cannot make the windows tiny.
		var calib []float64
		for range 5 {
			d, err := paths["ref"](50)
			if err != nil {
				t.Fatal(err)
			}
			calib = append(calib, d.Seconds())
		}
		slow, err := slowest(b, time.Duration(median(calib)*float64(time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		iters := max(20, int(window.Seconds()/(slow[0]/50)))
		order := []string{"ref", "shim", "cgo", "go", "ref2"}
		times := map[string][]float64{}
		for round := range rounds {
			for i := range order {
				name := order[(i+round)%len(order)]
				if _, err := paths[name](iters); err != nil {
					t.Fatal(err)
				}
				d, err := paths[name](iters)
				if err != nil {
					t.Fatal(err)
				}
				v, err := slowest(b, d)
				if err != nil {
					t.Fatal(err)
				}
				times[name] = append(times[name], v[0]/float64(iters))
			}
		}
		if b.rank == 0 {
			out := map[string]any{"bytes": bytes, "iters": iters, "rounds": rounds}
			for _, name := range order {
				out[name+"_us"] = round3(median(times[name]) * 1e6)
			}
			for _, name := range []string{"shim", "cgo", "go", "ref2"} {
				ratios := make([]float64, rounds)
				for i := range ratios {
					ratios[i] = times[name][i] / times["ref"][i]
				}
				out[name+"_vs_ref"] = []float64{round3(median(ratios)), round3(slices.Min(ratios)), round3(slices.Max(ratios))}
			}
			line, _ := json.Marshal(out)
			fmt.Println(string(line))
		}
	}
}

// overheadWorld joins the world of the launcher this test binary runs
// under, as collective.Init would with --backend ccl.
func overheadWorld(t *testing.B) *cclBackend {
	topo, err := detect.Detect(os.Getenv, detect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	token, err := tcp.ResolveToken(os.Getenv, topo)
	if err != nil {
		t.Fatal(err)
	}
	cpus, _ := envsetup.ReadCPUs("/")
	be, err := New(Options{Topology: topo, Getenv: os.Getenv, CPUs: cpus, Rendezvous: tcp.Options{
		Rank: topo.Rank, Size: topo.WorldSize, MasterAddr: topo.MasterAddr, MasterPort: topo.MasterPort,
		Token: token, Timeout: time.Minute, RendezvousTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	return be.(*cclBackend)
}

// slowest is every rank's d, the largest, in seconds.
func slowest(b *cclBackend, d time.Duration) ([]float64, error) {
	v := []float64{d.Seconds()}
	return v, b.Allreduce(backend.BufferOf(v), backend.BufferOf(v), backend.Max)
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// BenchmarkCCLAllreduce8B is one 8-byte allreduce through the backend in a
// world of one (no launcher): the Go side's cost per call and its
// allocations, beside the same calls looped in C++ (ref: as the reference
// program; shim: the shim's direct path).
func BenchmarkCCLAllreduce8B(b *testing.B) {
	topo, err := detect.Detect(os.Getenv, detect.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if topo.WorldSize != 1 {
		b.Skip("benchmarks run b.N iterations, which differs between ranks: run without a launcher")
	}
	be := overheadWorld(b)
	defer be.Close()
	send, recv := []float32{1, 2}, make([]float32, 2)
	sb, rb := backend.BufferOf(send), backend.BufferOf(recv)
	b.Run("go", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if err := be.Allreduce(sb, rb, backend.Sum); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, p := range []struct {
		name string
		path int
	}{{"ref", loopRef}, {"shim", loopShim}} {
		b.Run(p.name, func(b *testing.B) {
			if _, err := be.cLoop(p.path, sb, rb, b.N); err != nil {
				b.Fatal(err)
			}
		})
	}
}
