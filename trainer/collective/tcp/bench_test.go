package tcp

import (
	"fmt"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/tcp/internal/tcptest"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

type tcpBenchSize struct {
	name  string
	bytes int
}

var tcpBenchSizes = []tcpBenchSize{{"8B", 8}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}}

// BenchmarkTCPAllreduce: float32 sum, two ranks in this process. For two
// ranks busbw = algbw = bytes/time.
func BenchmarkTCPAllreduce(b *testing.B) {
	for _, s := range tcpBenchSizes {
		b.Run(s.name, func(b *testing.B) {
			bs := tcpWorld(b, 2, nil)
			n := s.bytes / 4
			bufs := [][]float32{make([]float32, n), make([]float32, n)}
			var wg sync.WaitGroup
			var err1 error
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range b.N {
					if err := bs[1].Allreduce(backend.BufferOf(bufs[1]), backend.BufferOf(bufs[1]), backend.Sum); err != nil {
						err1 = err
						return
					}
				}
			}()
			b.SetBytes(int64(s.bytes))
			b.ResetTimer()
			for range b.N {
				if err := bs[0].Allreduce(backend.BufferOf(bufs[0]), backend.BufferOf(bufs[0]), backend.Sum); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			wg.Wait()
			if err1 != nil {
				b.Fatal(err1)
			}
			b.ReportMetric(float64(s.bytes)/(float64(b.Elapsed().Nanoseconds())/float64(b.N)), "busbw-GB/s")
		})
	}
}

// BenchmarkTCPTwoProcess: allreduce (float32 sum) between two separate
// processes, this test binary run again twice as the ranks (as loopback
// between processes, not goroutines, behaves). The ranks time b.N calls
// after the rendezvous and a first call, so ns/op, busbw and cpu-ns/op
// (user+system time per call, the load-independent cost) are theirs, not
// the processes' start-up. Knobs, in the environment:
//
//	BATCHKIT_TCP_BENCH_SIZES=8,65536   sizes in bytes (default 8B, 1MiB, 16MiB)
//	BATCHKIT_TCP_TUNE=rd=0,seg=262144  tuning variables: sockbuf, seg, rd, tree
//	BATCHKIT_TCP_BENCH_RAW=1           the transport's floor: both ranks write
//	                                   size bytes to each other, no algorithm
//	BATCHKIT_TCP_BENCH_PROFILE=path    each rank's CPU profile to path.RANK
func BenchmarkTCPTwoProcess(b *testing.B) {
	if w, ok := tcpBenchWorkerFromEnv(os.Getenv); ok {
		tcpBenchWorker(b, w)
		return
	}
	sizes, err := tcpTwoProcessSizes(os.Getenv("BATCHKIT_TCP_BENCH_SIZES"))
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range sizes {
		b.Run(s.name, func(b *testing.B) { tcpTwoProcess(b, s.bytes) })
	}
}

// tcpTwoProcessSizes reads BATCHKIT_TCP_BENCH_SIZES.
func tcpTwoProcessSizes(env string) ([]tcpBenchSize, error) {
	if env == "" {
		return tcpBenchSizes, nil
	}
	var sizes []tcpBenchSize
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 4 {
			return nil, fmt.Errorf("BATCHKIT_TCP_BENCH_SIZES: %q is not a size in bytes (at least 4)", f)
		}
		sizes = append(sizes, tcpBenchSize{f + "B", n})
	}
	return sizes, nil
}

// tcpBenchWorkerConf is one rank's part of BenchmarkTCPTwoProcess, as the
// parent hands it down in the environment.
type tcpBenchWorkerConf struct {
	rank, port, size, iters int
	tune                    string
	raw                     bool
}

const (
	tcpBenchWorkerVar = "BATCHKIT_TCP_BENCH_WORKER" // "rank,port,size,iters"
	tcpBenchTuneVar   = "BATCHKIT_TCP_TUNE"
)

func (w tcpBenchWorkerConf) env() string {
	return fmt.Sprintf("%s=%d,%d,%d,%d", tcpBenchWorkerVar, w.rank, w.port, w.size, w.iters)
}

// tcpBenchWorkerFromEnv: ok when this process is a rank of
// BenchmarkTCPTwoProcess.
func tcpBenchWorkerFromEnv(getenv func(string) string) (tcpBenchWorkerConf, bool) {
	var w tcpBenchWorkerConf
	v := getenv(tcpBenchWorkerVar)
	if v == "" {
		return w, false
	}
	if _, err := fmt.Sscanf(v, "%d,%d,%d,%d", &w.rank, &w.port, &w.size, &w.iters); err != nil {
		return w, false
	}
	w.tune = getenv(tcpBenchTuneVar)
	w.raw = getenv("BATCHKIT_TCP_BENCH_RAW") == "1"
	return w, true
}

// tcpTwoProcess runs both ranks for b.N calls of size bytes and reports
// rank 0's timing.
func tcpTwoProcess(b *testing.B, size int) {
	port := tcptest.FreePort(b)
	outs := make([]strings.Builder, 2)
	cmds := make([]*exec.Cmd, 2)
	for r := range 2 {
		args := []string{"-test.run=^$", "-test.bench=^BenchmarkTCPTwoProcess$", "-test.benchtime=1x", "-test.count=1"}
		if p := os.Getenv("BATCHKIT_TCP_BENCH_PROFILE"); p != "" {
			args = append(args, fmt.Sprintf("-test.cpuprofile=%s.%d", p, r))
		}
		cmd := exec.Command(os.Args[0], args...)
		w := tcpBenchWorkerConf{rank: r, port: port, size: size, iters: b.N}
		cmd.Env = append(os.Environ(), w.env())
		cmd.Stdout, cmd.Stderr = &outs[r], &outs[r]
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds[r] = cmd
	}
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			b.Errorf("rank %d: %v\n%s", r, err, outs[r].String())
		}
	}
	if b.Failed() {
		return
	}
	var ns, cpuNs int64
	if _, err := fmt.Sscanf(tcpBenchResultLine(outs[0].String()), "RESULT ns=%d cpu_ns=%d", &ns, &cpuNs); err != nil {
		b.Fatalf("rank 0 reported no RESULT line (%v):\n%s", err, outs[0].String())
	}
	perOp := float64(ns) / float64(b.N)
	b.ReportMetric(perOp, "ns/op")
	b.ReportMetric(float64(size)/perOp, "busbw-GB/s") // two ranks: busbw = algbw
	b.ReportMetric(float64(cpuNs)/float64(b.N), "cpu-ns/op")
}

func tcpBenchResultLine(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "RESULT ") {
			return line
		}
	}
	return ""
}

// tcpBenchWorker is one rank of BenchmarkTCPTwoProcess: w.iters calls
// after a first one (which also waits for the other rank), timed.
func tcpBenchWorker(b *testing.B, w tcpBenchWorkerConf) {
	tcpBenchTune(w.tune)
	o := tcpTestOptions(w.rank, 2, w.port)
	o.RendezvousTimeout = 30 * time.Second
	be, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	x := make([]float32, w.size/4)
	call := func() error { return be.Allreduce(backend.BufferOf(x), backend.BufferOf(x), backend.Sum) }
	if w.raw {
		c := be.(*tcpBackend).peers[1-w.rank].conn
		in := make([]byte, w.size)
		call = func() error {
			done := make(chan error, 1)
			go func() { _, err := c.Write(backend.BufferOf(x).Bytes()); done <- err }()
			if _, err := io.ReadFull(c, in); err != nil {
				return err
			}
			return <-done
		}
	}
	if err := call(); err != nil {
		b.Fatal(err)
	}
	cpu0, start := cpuTime(), time.Now()
	for range w.iters {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	d, cpu := time.Since(start), cpuTime()-cpu0
	if w.rank == 0 {
		fmt.Printf("RESULT ns=%d cpu_ns=%d\n", d.Nanoseconds(), cpu.Nanoseconds())
	}
}

// tcpBenchTune sets the tuning variables named in BATCHKIT_TCP_TUNE's
// value ("rd=0,seg=262144").
func tcpBenchTune(tune string) {
	vars := map[string]*int{"sockbuf": &sockBuf, "seg": &segBytes, "rd": &rdMax, "tree": &treeMax}
	for _, kv := range strings.Split(tune, ",") {
		k, v, _ := strings.Cut(kv, "=")
		if p, ok := vars[k]; ok {
			*p, _ = strconv.Atoi(v)
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTCPCrossover compares recursive doubling and the ring across
// sizes and world sizes, all ranks in this process (the rdMax tuning).
func BenchmarkTCPCrossover(b *testing.B) {
	defer func(old int) { rdMax = old }(rdMax)
	for _, n := range []int{2, 3, 4, 5} {
		for _, size := range []int{16 << 10, 64 << 10, 256 << 10, 1 << 20} {
			for _, algo := range []string{"rd", "ring"} {
				b.Run(fmt.Sprintf("world%d/%dKiB/%s", n, size>>10, algo), func(b *testing.B) {
					rdMax = 0
					if algo == "rd" {
						rdMax = 1 << 40
					}
					benchOnWorld(b, n, size, func(be *tcpBackend, buf backend.Buffer, _ int) error {
						return be.Allreduce(buf, buf, backend.Sum)
					})
				})
			}
		}
	}
}

// BenchmarkTCPBroadcastCrossover compares the binomial tree and the chain
// (the treeMax tuning), all ranks in this process.
func BenchmarkTCPBroadcastCrossover(b *testing.B) {
	defer func(old int) { treeMax = old }(treeMax)
	for _, n := range []int{3, 5} {
		for _, size := range []int{16 << 10, 64 << 10, 256 << 10, 1 << 20} {
			for _, algo := range []string{"tree", "chain"} {
				b.Run(fmt.Sprintf("world%d/%dKiB/%s", n, size>>10, algo), func(b *testing.B) {
					treeMax = 0
					if algo == "tree" {
						treeMax = 1 << 40
					}
					benchOnWorld(b, n, size, func(be *tcpBackend, buf backend.Buffer, i int) error {
						return be.Broadcast(buf, i%n)
					})
				})
			}
		}
	}
}

// benchOnWorld times b.N calls of op (given the iteration) on every rank of
// an in-process world of n ranks, each with its own size-byte float32 buffer.
func benchOnWorld(b *testing.B, n, size int, op func(be *tcpBackend, buf backend.Buffer, i int) error) {
	b.Helper()
	bs := tcpWorld(b, n, nil)
	bufs := make([][]float32, n)
	for r := range bufs {
		bufs[r] = make([]float32, size/4)
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	errs := tcpOnAll(bs, func(r int, be *tcpBackend) error {
		for i := range b.N {
			if err := op(be, backend.BufferOf(bufs[r]), i); err != nil {
				return err
			}
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}
