package mpi_test

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Statistics for the opt-in measurements (bench_test.go). They live in
// an untagged file so that their own tests run in every build.

// medianCI returns the median of v and a distribution-free 95 % confidence
// interval for it: the order statistics x(l) and x(n+1-l) (1-based) for the
// largest l whose two-sided binomial tail, 2·P(Bin(n, ½) ≤ l-1), is at most
// 5 %. Such an interval assumes nothing about the shape of the noise, which
// on a shared VM is anything but normal. Below 6 values no l qualifies and
// the interval is the whole range (coverage under 95 %). v is not modified;
// it must not be empty.
func medianCI(v []float64) (lo, med, hi float64) {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		med = s[n/2]
	} else {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	l := 1
	for k := 1; k < n/2; k++ {
		// k values at most: P(Bin(n, ½) ≤ k) = Σ C(n, i) / 2^n, i ≤ k.
		if 2*binomTail(n, k) > 0.05 {
			break
		}
		l = k + 1
	}
	return s[l-1], med, s[n-l]
}

// binomTail is P(Bin(n, ½) ≤ k), summed in log space (2^-n underflows from
// n = 1075).
func binomTail(n, k int) float64 {
	lnN, _ := math.Lgamma(float64(n + 1))
	p := 0.0
	for i := 0; i <= k; i++ {
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		p += math.Exp(lnN - a - b - float64(n)*math.Ln2)
	}
	return p
}

func TestMedianCI(t *testing.T) {
	// 1..n in reverse, so that the order statistic x(i) is i and the
	// function has to sort.
	seq := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(n - i)
		}
		return v
	}
	for _, tc := range []struct {
		name        string
		v           []float64
		lo, med, hi float64
	}{
		{"one value", []float64{0.97}, 0.97, 0.97, 0.97},
		// Under 6 values no interval reaches 95 %: the whole range.
		{"five values", seq(5), 1, 3, 5},
		// The textbook intervals (x(l), x(n+1-l)): n 6 → (1, 6), 11 → (2,
		// 10), 20 → (6, 15), 100 → (40, 61).
		{"six values", seq(6), 1, 3.5, 6},
		{"eleven values", seq(11), 2, 6, 10},
		{"twenty values", seq(20), 6, 10.5, 15},
		{"a hundred values", seq(100), 40, 50.5, 61},
		{"ties", []float64{1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1}, 1, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.v)
			lo, med, hi := medianCI(tc.v)
			if got, want := [3]float64{lo, med, hi}, [3]float64{tc.lo, tc.med, tc.hi}; got != want {
				t.Errorf("medianCI = %v, want %v", got, want)
			}
			if !slices.Equal(in, tc.v) {
				t.Errorf("medianCI reordered its input: %v", tc.v)
			}
		})
	}
}

func TestBinomTail(t *testing.T) {
	for _, tc := range []struct {
		n, k int
		want float64
	}{
		{1, 0, 0.5},
		{11, 1, 12.0 / 2048},
		{20, 5, 21700.0 / 1048576},
		{2000, 2000, 1}, // 2^-2000 underflows unless summed in log space
		{2000, 999, 0.5 - 0.5*0.017839},
	} {
		if got := binomTail(tc.n, tc.k); math.Abs(got-tc.want) > 1e-5 {
			t.Errorf("binomTail(%d, %d) = %.7f, want %.7f", tc.n, tc.k, got, tc.want)
		}
	}
}

// overhead is BenchmarkMPIOverhead's result for one size, one JSON line: the
// medians with their intervals and the rounds they come from, so that the
// rounds of several launches can be pooled (poolOverhead).
type overhead struct {
	Bytes   int    `json:"bytes"`
	Ranks   int    `json:"ranks"`
	Library string `json:"library"` // the build's (mpich for Intel MPI too)
	// The library loaded (mpi.LibraryVersion), which says Intel MPI.
	MPIVersion string `json:"mpi_version,omitempty"`
	Iters      int    `json:"iters"` // calls per window (the first launch's, pooled)
	Rounds     int    `json:"rounds"`
	Resized    int    `json:"resized"` // rounds dropped for windows under half the length
	Launches   int    `json:"launches"`
	// Timed Go calls, and how many of them ran on the worker thread.
	GoCalls    int `json:"go_calls"`
	GoHandoffs int `json:"go_handoffs"`
	// GOMAXPROCS while it measured; pooled, the launches' lowest. Below 2 the
	// runtime hands off the P of every call (mpi.SetupProcess): not what a
	// batchkit rank runs.
	Procs   int     `json:"gomaxprocs"`
	CUs     float64 `json:"c_us"` // medians of the rounds' µs per call
	GoUs    float64 `json:"go_us"`
	GoVsC   float64 `json:"go_vs_c"` // Go's busbw relative to C: median, 95 % interval
	GoVsCLo float64 `json:"go_vs_c_lo"`
	GoVsCHi float64 `json:"go_vs_c_hi"`
	AA      float64 `json:"aa"` // the second C window relative to the first
	AALo    float64 `json:"aa_lo"`
	AAHi    float64 `json:"aa_hi"`
	// The launches' own go_vs_c medians, lowest and highest.
	LaunchMin float64 `json:"launch_min"`
	LaunchMax float64 `json:"launch_max"`
	// Per round: µs per call of C (the mean of its two windows) and of Go,
	// and the two ratios.
	CUsRounds   []float64 `json:"c_us_rounds"`
	GoUsRounds  []float64 `json:"go_us_rounds"`
	GoVsCRounds []float64 `json:"go_vs_c_rounds"`
	AARounds    []float64 `json:"aa_rounds"`
}

// launchOverhead is one launch's result from its rounds (at least one).
func launchOverhead(bytes, ranks int, library string, iters int, cUs, goUs, goVsC, aa []float64) overhead {
	o := overhead{Bytes: bytes, Ranks: ranks, Library: library, Iters: iters, Launches: 1,
		CUsRounds: cUs, GoUsRounds: goUs, GoVsCRounds: goVsC, AARounds: aa}
	o.summarize()
	o.LaunchMin, o.LaunchMax = o.GoVsC, o.GoVsC
	return o
}

// summarize sets the medians and intervals from the rounds.
func (o *overhead) summarize() {
	o.Rounds = len(o.GoVsCRounds)
	_, o.CUs, _ = medianCI(o.CUsRounds)
	_, o.GoUs, _ = medianCI(o.GoUsRounds)
	o.GoVsCLo, o.GoVsC, o.GoVsCHi = medianCI(o.GoVsCRounds)
	o.AALo, o.AA, o.AAHi = medianCI(o.AARounds)
}

// poolOverhead pools the rounds of launches of BenchmarkMPIOverhead: one result
// per library, world size and message size, in the order they first
// appear, its medians and intervals over all of their rounds. A launch's
// median moves by ~1 % from launch to launch here, more than its own
// interval allows for (what each process gets of the machine differs), so
// make bench measures each size in several launches, and pooling their
// rounds weighs every launch by its rounds.
func poolOverhead(launches []overhead) []overhead {
	type key struct {
		lib          string
		ranks, bytes int
	}
	var out []overhead
	at := map[key]int{}
	for _, o := range launches {
		k := key{o.Library, o.Ranks, o.Bytes}
		i, seen := at[k]
		if !seen {
			i = len(out)
			at[k] = i
			out = append(out, overhead{Bytes: o.Bytes, Ranks: o.Ranks, Library: o.Library, MPIVersion: o.MPIVersion, Iters: o.Iters,
				LaunchMin: math.Inf(1), LaunchMax: math.Inf(-1)})
		}
		p := &out[i]
		p.Launches++
		p.Resized += o.Resized
		p.GoCalls += o.GoCalls
		p.GoHandoffs += o.GoHandoffs
		if p.Launches == 1 || o.Procs < p.Procs {
			p.Procs = o.Procs
		}
		p.LaunchMin, p.LaunchMax = min(p.LaunchMin, o.GoVsC), max(p.LaunchMax, o.GoVsC)
		p.CUsRounds = append(p.CUsRounds, o.CUsRounds...)
		p.GoUsRounds = append(p.GoUsRounds, o.GoUsRounds...)
		p.GoVsCRounds = append(p.GoVsCRounds, o.GoVsCRounds...)
		p.AARounds = append(p.AARounds, o.AARounds...)
	}
	for i := range out {
		out[i].summarize()
	}
	return out
}

// readOverhead reads BenchmarkMPIOverhead's JSON lines from path, skipping
// lines that are not JSON objects (the test binary's own output).
func readOverhead(path string) ([]overhead, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []overhead
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var o overhead
		if err := json.Unmarshal(line, &o); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if len(o.GoVsCRounds) == 0 || len(o.AARounds) != len(o.GoVsCRounds) ||
			len(o.CUsRounds) != len(o.GoVsCRounds) || len(o.GoUsRounds) != len(o.GoVsCRounds) {
			return nil, fmt.Errorf("%s:%d: want four arrays of rounds of one length (BenchmarkMPIOverhead's output)", path, n)
		}
		out = append(out, o)
	}
	return out, sc.Err()
}

// BenchmarkMPIOverheadPool is make bench's pooling step, not a measurement:
// it prints the pooled results (poolOverhead) of the BenchmarkMPIOverhead
// launches whose JSON lines are in the file BATCHKIT_MPI_OVERHEAD_POOL
// names, one line per size. It needs no launcher and no MPI:
//
//	BATCHKIT_MPI_OVERHEAD_POOL=launches.jsonl collective.test -test.run '^$' \
//	    -test.bench '^BenchmarkMPIOverheadPool$' -test.benchtime 1x
func BenchmarkMPIOverheadPool(b *testing.B) {
	benchOnce(b)
	path := os.Getenv("BATCHKIT_MPI_OVERHEAD_POOL")
	if path == "" {
		b.Skip("set BATCHKIT_MPI_OVERHEAD_POOL to a file of BenchmarkMPIOverhead's JSON lines")
	}
	launches, err := readOverhead(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range poolOverhead(launches) {
		line, err := json.Marshal(o)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("%s\n", line)
	}
}

// benchOnce skips a measurement unless the benchmark runs once
// (-test.benchtime 1x): the measurements keep their own schedules, the
// same on every rank, and print their results, so they ignore b.N.
func benchOnce(b *testing.B) {
	b.Helper()
	if f := flag.Lookup("test.benchtime"); f == nil || f.Value.String() != "1x" {
		b.Skip("runs once: -test.run '^$' -test.benchtime 1x (under an MPI launcher for the MPI ones)")
	}
}

func TestPoolOverhead(t *testing.T) {
	launch := func(lib string, bytes int, goVsC ...float64) overhead {
		var cUs, goUs, aa []float64
		for _, r := range goVsC {
			cUs, goUs, aa = append(cUs, 10), append(goUs, 10/r), append(aa, 1)
		}
		return launchOverhead(bytes, 2, lib, 10, cUs, goUs, goVsC, aa)
	}
	launches := []overhead{
		launch("openmpi", 8, 0.8, 0.9, 0.7),
		launch("openmpi", 65536, 0.96, 0.97, 0.95),
		launch("openmpi", 8, 0.6),
		launch("openmpi", 65536, 0.99, 1.00, 0.98, 1.01),
		launch("mpich", 65536, 0.5),
	}
	launches[1].Resized, launches[3].Resized = 2, 1
	launches[1].GoCalls, launches[1].GoHandoffs = 30, 0
	launches[3].GoCalls, launches[3].GoHandoffs = 40, 12
	for i, procs := range []int{2, 2, 2, 1, 2} { // one 64 KiB launch at GOMAXPROCS 1
		launches[i].Procs = procs
	}
	got := poolOverhead(launches)
	type row struct {
		Lib                       string
		Bytes, Launches, N, Procs int
		GoVsC, LMin, LMax, AA     float64
	}
	var rows []row
	for _, o := range got {
		rows = append(rows, row{o.Library, o.Bytes, o.Launches, o.Rounds, o.Procs, o.GoVsC, o.LaunchMin, o.LaunchMax, o.AA})
	}
	want := []row{
		{"openmpi", 8, 2, 4, 2, 0.75, 0.6, 0.8, 1},        // rounds 0.6 0.7 0.8 0.9
		{"openmpi", 65536, 2, 7, 1, 0.98, 0.96, 0.995, 1}, // the median of all 7 rounds, not of the launches; the lowest GOMAXPROCS
		{"mpich", 65536, 1, 1, 2, 0.5, 0.5, 0.5, 1},       // another library is another result
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("pooled (-want +got):\n%s", diff)
	}
	if g := got[1]; len(g.GoVsCRounds) != 7 || g.GoVsCRounds[3] != 0.99 || g.GoUs != 10/0.98 || g.Resized != 3 ||
		g.GoCalls != 70 || g.GoHandoffs != 12 {
		t.Errorf("64 KiB pooled rounds %v, Go µs %v, %d resized, %d of %d calls on the worker: "+
			"want the launches' 7 rounds in order, median 10/0.98, 3 resized, 12 of 70",
			g.GoVsCRounds, g.GoUs, g.Resized, g.GoHandoffs, g.GoCalls)
	}
}

func TestReadOverhead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := `{"bytes":8,"ranks":2,"library":"mpich","go_vs_c":0.9,"c_us_rounds":[1],"go_us_rounds":[1.1],"go_vs_c_rounds":[0.9],"aa_rounds":[1]}`
	o, err := readOverhead(write("good", "=== RUN   BenchmarkMPIOverhead\n"+good+"\nPASS\n"))
	if err != nil || len(o) != 1 || o[0].Library != "mpich" || o[0].GoVsCRounds[0] != 0.9 {
		t.Errorf("readOverhead: %+v, %v", o, err)
	}
	for name, text := range map[string]string{
		"broken JSON":   `{"bytes":8,`,
		"no rounds":     `{"bytes":8,"go_vs_c":0.9}`,
		"uneven rounds": `{"bytes":8,"c_us_rounds":[1,2],"go_us_rounds":[1],"go_vs_c_rounds":[0.9],"aa_rounds":[1]}`,
	} {
		if _, err := readOverhead(write("bad", text+"\n")); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := readOverhead(dir + "/missing"); err == nil {
		t.Error("a missing file: no error")
	}
}
