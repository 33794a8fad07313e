package tcp

import (
	"github.com/batchkit/batchkit/trainer/collective/tcp/internal/tcptest"

	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchkit/batchkit/trainer/collective/backend"
)

// BenchmarkTCPScale: the TCP backend at hundreds of ranks, each a separate
// process (this test binary run again, GOMAXPROCS=1), as `batchkit run -n
// N` starts them. Every rank forms the world and runs ten 8-byte
// allreduces: scale, not bandwidth. It prints one Markdown row per world
// size (docs/performance.md, "TCP backend at scale"): when the last rank
// had started, when the world was up and when the last allreduce was done
// (all from the first rank's start), the connections each rank holds
// afterwards and its memory: peak RSS (which counts the binary's pages that
// every rank shares), private memory, and all ranks' proportional set
// sizes summed (what the world takes). scripts/tcp-scale.sh runs it.
//
//	BATCHKIT_TCP_SCALE_SIZES=64,128,256,512   world sizes (the default)
//	BATCHKIT_TCP_SCALE_TIMEOUT=60s            the ranks' rendezvous timeout
//	BATCHKIT_TCP_SHM=0                        every link on TCP
func BenchmarkTCPScale(b *testing.B) {
	if w, ok := scaleWorkerFromEnv(os.Getenv); ok {
		scaleWorker(w)
		return
	}
	sizes, err := scaleSizes(os.Getenv("BATCHKIT_TCP_SCALE_SIZES"))
	if err != nil {
		b.Fatal(err)
	}
	timeout := time.Minute
	if v := os.Getenv("BATCHKIT_TCP_SCALE_TIMEOUT"); v != "" {
		if timeout, err = time.ParseDuration(v); err != nil {
			b.Fatalf("BATCHKIT_TCP_SCALE_TIMEOUT: %v", err)
		}
	}
	var rows []string
	for _, n := range sizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			row := scaleRun(b, n, timeout)
			rows = append(rows, row.markdown())
			b.ReportMetric(row.done.Seconds(), "s-done")
			b.ReportMetric(float64(row.connMax), "conns-max")
		})
	}
	fmt.Println(scaleHeader)
	for _, r := range rows {
		fmt.Println(r)
	}
}

const scaleWorkerVar = "BATCHKIT_TCP_SCALE_WORKER" // "rank,size,port,timeout,dir"

// scaleSizes reads BATCHKIT_TCP_SCALE_SIZES.
func scaleSizes(env string) ([]int, error) {
	if env == "" {
		return []int{64, 128, 256, 512}, nil
	}
	var sizes []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 2 {
			return nil, fmt.Errorf("BATCHKIT_TCP_SCALE_SIZES: %q is not a world size (at least 2)", f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// scaleWorkerConf is one rank's part, as the parent hands it down.
type scaleWorkerConf struct {
	rank, size, port int
	timeout          time.Duration
	dir              string // where the rank writes its scaleReport
}

func (w scaleWorkerConf) env() string {
	return fmt.Sprintf("%s=%d,%d,%d,%s,%s", scaleWorkerVar, w.rank, w.size, w.port, w.timeout, w.dir)
}

func scaleWorkerFromEnv(getenv func(string) string) (scaleWorkerConf, bool) {
	var w scaleWorkerConf
	f := strings.SplitN(getenv(scaleWorkerVar), ",", 5)
	if len(f) != 5 {
		return w, false
	}
	var err [4]error
	w.rank, err[0] = strconv.Atoi(f[0])
	w.size, err[1] = strconv.Atoi(f[1])
	w.port, err[2] = strconv.Atoi(f[2])
	w.timeout, err[3] = time.ParseDuration(f[3])
	w.dir = f[4]
	return w, slices.Equal(err[:], make([]error, 4))
}

// scaleReport is what a rank measured, in Unix nanoseconds and bytes.
type scaleReport struct {
	Rank     int    `json:"rank"`
	Started  int64  `json:"started"`  // the process reached the benchmark
	Up       int64  `json:"up"`       // New returned
	Done     int64  `json:"done"`     // the last allreduce returned
	End      int64  `json:"end"`      // the rank wrote this report
	CPU      int64  `json:"cpu"`      // the process's CPU time when New returned
	Conns    int    `json:"conns"`    // sockets held after New
	ShmLinks int    `json:"shmLinks"` // links in shared memory
	PeakRSS  int64  `json:"peakRSS"`  // VmHWM after the allreduces
	Private  int64  `json:"private"`  // memory no other process shares (then)
	PSS      int64  `json:"pss"`      // its share of all it maps (then)
	Err      string `json:"err,omitempty"`
}

// scaleWorker is one rank: New, ten 8-byte allreduces checked, report.
func scaleWorker(w scaleWorkerConf) {
	rep := scaleReport{Rank: w.rank, Started: time.Now().UnixNano()}
	defer func() {
		rep.PeakRSS = procBytes("/proc/self/status", "VmHWM")
		rep.Private = procBytes("/proc/self/smaps_rollup", "Private_Clean") + procBytes("/proc/self/smaps_rollup", "Private_Dirty")
		rep.PSS = procBytes("/proc/self/smaps_rollup", "Pss")
		rep.End = time.Now().UnixNano()
		data, _ := json.Marshal(rep)
		os.WriteFile(filepath.Join(w.dir, strconv.Itoa(w.rank)+".json"), data, 0o644)
	}()
	o := tcpTestOptions(w.rank, w.size, w.port)
	o.RendezvousTimeout = w.timeout
	o.NoShm = os.Getenv("BATCHKIT_TCP_SHM") == "0"
	o.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	be, err := New(o)
	if err != nil {
		rep.Err = err.Error()
		return
	}
	defer be.Close()
	rep.Up = time.Now().UnixNano()
	rep.CPU = cpuTime().Nanoseconds()
	rep.Conns = openSockets()
	for _, p := range be.(*tcpBackend).peers {
		if p != nil && p.shm != nil {
			rep.ShmLinks++
		}
	}
	x := make([]float32, 2)
	want := float32(w.size * (w.size + 1) / 2)
	for range 10 {
		x[0], x[1] = float32(w.rank+1), float32(w.rank+1)
		if err := be.Allreduce(backend.BufferOf(x), backend.BufferOf(x), backend.Sum); err != nil {
			rep.Err = err.Error()
			return
		}
		if x[0] != want || x[1] != want {
			rep.Err = fmt.Sprintf("allreduce gave %v, want %v twice", x, want)
			return
		}
	}
	rep.Done = time.Now().UnixNano()
}

// openSockets counts this process's open sockets.
func openSockets() int {
	fds, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// procBytes reads a "kB" field of /proc/self/status or smaps_rollup, in
// bytes.
func procBytes(path, field string) int64 {
	data, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// scaleRow is one world size's line of the table.
type scaleRow struct {
	n                 int
	started, up, done time.Duration // since the first rank started
	end               time.Duration // the last report
	connMed, connMax  int           // after New
	conn0             int           // rank 0's
	cpu0, cpuMed      time.Duration // CPU time until New returned: rank 0's, the median
	rssMed, rssMax    int64
	privMed           int64 // private memory per rank, the median
	pss               int64 // all ranks' proportional set sizes: their memory
	shmPerRank        int64 // the link files' share per rank (tmpfs, not RSS)
	failed            int
	why               string // the first failure's reason
}

const scaleHeader = "| ranks | all started | world up | allreduce done | CPU until up: rank 0 / median | connections per rank: median / max (rank 0) | peak RSS per rank: median / max | private memory per rank | all ranks (PSS) | link files in /dev/shm per rank | result |\n|---|---|---|---|---|---|---|---|---|---|---|"

func (r scaleRow) markdown() string {
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	sec := func(d time.Duration) string {
		if d <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	result := "ok"
	if r.failed > 0 {
		result = fmt.Sprintf("%d ranks failed, the last after %s: %s", r.failed, sec(r.end), r.why)
	}
	cpu := fmt.Sprintf("%.0f ms / %.0f ms", r.cpu0.Seconds()*1000, r.cpuMed.Seconds()*1000)
	conns := fmt.Sprintf("%d / %d (%d)", r.connMed, r.connMax, r.conn0)
	shm := mib(r.shmPerRank)
	if r.failed > 0 { // what the ranks that came up hold says nothing
		cpu, conns, shm = "—", "—", "—"
	}
	return fmt.Sprintf("| %d | %s | %s | %s | %s | %s | %s / %s | %s | %.2f GiB | %s | %s |",
		r.n, sec(r.started), sec(r.up), sec(r.done), cpu, conns,
		mib(r.rssMed), mib(r.rssMax), mib(r.privMed), float64(r.pss)/(1<<30), shm, result)
}

// scaleRun starts n ranks, waits for them (killing them after the
// rendezvous timeout and half a minute more) and sums up their reports.
func scaleRun(b *testing.B, n int, timeout time.Duration) scaleRow {
	dir := b.TempDir()
	port := tcptest.FreePort(b)
	cmds := make([]*exec.Cmd, n)
	for r := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkTCPScale$", "-test.benchtime=1x", "-test.count=1")
		w := scaleWorkerConf{rank: r, size: n, port: port, timeout: timeout, dir: dir}
		cmd.Env = append(os.Environ(), w.env(), "GOMAXPROCS=1")
		log, err := os.Create(filepath.Join(dir, strconv.Itoa(r)+".log"))
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			b.Fatalf("starting rank %d: %v", r, err)
		}
		log.Close()
		cmds[r] = cmd
	}
	kill := time.AfterFunc(timeout+30*time.Second, func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
	})
	defer kill.Stop()
	for _, c := range cmds {
		c.Wait()
	}
	return scaleSum(n, readScaleReports(dir, n))
}

// readScaleReports reads every rank's report; a rank that wrote none gets
// one that says so, with the end of its output.
func readScaleReports(dir string, n int) []scaleReport {
	reps := make([]scaleReport, n)
	for r := range reps {
		data, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(r)+".json"))
		if err == nil {
			err = json.Unmarshal(data, &reps[r])
		}
		if err != nil {
			out, _ := os.ReadFile(filepath.Join(dir, strconv.Itoa(r)+".log"))
			reps[r] = scaleReport{Rank: r, Err: fmt.Sprintf("no report (%v): %.200s", err, out)}
		}
	}
	return reps
}

func scaleSum(n int, reps []scaleReport) scaleRow {
	row := scaleRow{n: n, conn0: reps[0].Conns}
	var first int64 // the first start; a rank that wrote no report has none
	for _, r := range reps {
		if r.Started > 0 && (first == 0 || r.Started < first) {
			first = r.Started
		}
	}
	var conns []int
	var rss, priv []int64
	var cpu []time.Duration
	for _, r := range reps {
		since := func(t int64) time.Duration { return time.Duration(t - first) }
		if r.Started > 0 {
			row.started, row.end = max(row.started, since(r.Started)), max(row.end, since(r.End))
		}
		if r.PeakRSS > 0 {
			rss, priv = append(rss, r.PeakRSS), append(priv, r.Private)
			row.pss += r.PSS
		}
		if r.Err != "" {
			if row.failed == 0 || r.Rank == 0 {
				row.why = r.Err
			}
			row.failed++
			continue
		}
		row.up, row.done = max(row.up, since(r.Up)), max(row.done, since(r.Done))
		conns, cpu = append(conns, r.Conns), append(cpu, time.Duration(r.CPU))
		row.shmPerRank += int64(r.ShmLinks)
	}
	if row.failed > 0 {
		row.up, row.done = 0, 0
	}
	if len(rss) > 0 {
		slices.Sort(rss)
		slices.Sort(priv)
		row.rssMed, row.rssMax, row.privMed = rss[len(rss)/2], rss[len(rss)-1], priv[len(priv)/2]
	}
	if len(conns) > 0 {
		slices.Sort(conns)
		row.connMed, row.connMax = conns[len(conns)/2], conns[len(conns)-1]
		row.cpu0 = time.Duration(reps[0].CPU)
		slices.Sort(cpu)
		row.cpuMed = cpu[len(cpu)/2]
		// Each link file is shared by two ranks.
		row.shmPerRank = row.shmPerRank * int64(shmSize(shmRingBytes)) / 2 / int64(len(conns))
	}
	if len(row.why) > 300 {
		row.why = row.why[:300] + "…"
	}
	row.why = strings.ReplaceAll(row.why, "|", `\|`)
	return row
}
