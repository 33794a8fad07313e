package bench

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func readFile(t *testing.T, name string) []Result {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, err := ReadResults(f, name)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestReadResults(t *testing.T) {
	rs := readFile(t, "tcp.jsonl") // "[0] " prefixes, a comment and a blank line
	want := Result{Op: "allreduce", Backend: "tcp", DType: "float32", Ranks: 2, Bytes: 8, Count: 2, Iters: 1000, Warmup: 100,
		AvgUs: 20.5, MinUs: 20.1, MaxUs: 20.9, AlgBW: 0.00039, BusBW: 0.00039}
	if len(rs) != 3 {
		t.Fatalf("%d results, want 3", len(rs))
	}
	if diff := cmp.Diff(want, rs[0]); diff != "" {
		t.Errorf("first result (-want +got):\n%s", diff)
	}
	if s := readFile(t, "mpi.jsonl")[0].Series(); s != "mpi (openmpi)" {
		t.Errorf("series of an MPI result: %q", s)
	}

	for _, tc := range []struct{ in, want string }{
		{"", "x: no results"},
		{"# only a comment\n", "x: no results"},
		{"op=allreduce\n", "x:1: not a JSON object"},
		{`{"op":"allreduce"}` + "\n", "x:1: not a bench result: missing backend, dtype, ranks, bytes, iters, avg_us, algbw_gbs, busbw_gbs"},
		{"\n" + `{"op":"allreduce","backend":"tcp","dtype":"float32","ranks":2,"bytes":0,"iters":1,"avg_us":1,"algbw_gbs":1,"busbw_gbs":1}`, "x:2: bytes 0: must be positive"},
		{`{"op":"allreduce","backend":"tcp","dtype":"float32","ranks":0,"bytes":8,"iters":1,"avg_us":1,"algbw_gbs":1,"busbw_gbs":1}`, "x:1: ranks 0: must be at least 1"},
		{`{"op":"allreduce","backend":"tcp","dtype":"float32","ranks":"2","bytes":8,"iters":1,"avg_us":1,"algbw_gbs":1,"busbw_gbs":1}`, "x:1: bad result"},
		{`{"op":"allreduce","backend":"tcp","ref_backend":"gloo"}`, "x:1: a comparison line (bench --baseline), not a result"},
	} {
		_, err := ReadResults(strings.NewReader(tc.in), "x")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ReadResults(%q) = %v, want an error starting %q", tc.in, err, tc.want)
		}
	}
}

// The text table, one header per series, as golden output.
func TestWriterText(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, Text)
	for _, name := range []string{"tcp.jsonl", "gloo.jsonl", "mpi.jsonl"} {
		for _, r := range readFile(t, name) {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	golden(t, "text.golden", out.Bytes())
}

func TestWriterJSON(t *testing.T) {
	rs := readFile(t, "mpi.jsonl")
	var out bytes.Buffer
	w := NewWriter(&out, JSON)
	for _, r := range rs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	const want = `{"op":"allreduce","backend":"mpi","mpi_library":"openmpi","dtype":"float32","ranks":4,"bytes":8,"count":2,"iters":1000,"warmup":100,"avg_us":5,"min_us":4,"max_us":6,"algbw_gbs":0.0016,"busbw_gbs":0.0024}`
	if first != want {
		t.Errorf("first line\n got %s\nwant %s", first, want)
	}
	back, err := ReadResults(&out, "out")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rs, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestCompare(t *testing.T) {
	cs, err := Compare(readFile(t, "tcp.jsonl"), readFile(t, "gloo.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || len(cs[0].Rows) != 3 {
		t.Fatalf("comparisons %+v: want one, of the 3 common sizes", cs)
	}
	// tcp's busbw over gloo's, from the times: 41/20.5, 50/25, 30/40.
	var ratios []float64
	for _, r := range cs[0].Rows {
		ratios = append(ratios, r.BusBWRatio)
	}
	if diff := cmp.Diff([]float64{2, 2, 0.75}, ratios); diff != "" {
		t.Errorf("ratios (-want +got):\n%s", diff)
	}
	if cs[0].GeoMeanRatio != 1.4422 { // cube root of 3
		t.Errorf("geometric mean %v", cs[0].GeoMeanRatio)
	}
	var text, js bytes.Buffer
	if err := WriteComparisons(&text, cs, Text); err != nil {
		t.Fatal(err)
	}
	golden(t, "compare.golden", text.Bytes())
	if err := WriteComparisons(&js, cs, JSON); err != nil {
		t.Fatal(err)
	}
	golden(t, "compare_json.golden", js.Bytes())

	// One file holding both series: Go MPI against the C reference.
	mpi := readFile(t, "mpi.jsonl")
	cs, err = Compare(mpi[:2], mpi[2:])
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Series != "mpi (openmpi)" || cs[0].Baseline != "c-openmpi" || cs[0].GeoMeanRatio != 0.8 {
		t.Errorf("mpi vs c: %+v", cs)
	}

	_, err = Compare(readFile(t, "tcp.jsonl"), mpi)
	const want = "nothing to compare: the results have tcp allreduce float32 2 ranks 8 B..4 KiB, the baseline mpi (openmpi) allreduce float32 4 ranks 8 B..1 MiB; c-openmpi allreduce float32 4 ranks 8 B..1 MiB (same op, dtype, ranks and sizes needed)"
	if err == nil || err.Error() != want {
		t.Errorf("Compare of different worlds: %v\nwant %s", err, want)
	}
	twice := append(readFile(t, "tcp.jsonl"), readFile(t, "tcp.jsonl")...)
	if _, err := Compare(twice, mpi); err == nil || !strings.Contains(err.Error(), "two results for tcp allreduce float32, 2 ranks, 8 bytes: give the runs distinct labels") {
		t.Errorf("Compare with a size twice: %v", err)
	}
}

func TestBest(t *testing.T) {
	r := func(backend string, bytes int64, us float64) Result {
		return Result{Op: "allreduce", Backend: backend, DType: "float32", Ranks: 2, Bytes: bytes, AvgUs: us}
	}
	in := []Result{r("tcp", 8, 30), r("tcp", 16, 31), r("gloo", 8, 400), r("tcp", 8, 25), r("tcp", 16, 40), r("gloo", 8, 390)}
	want := []Result{r("tcp", 8, 25), r("tcp", 16, 31), r("gloo", 8, 390)}
	if diff := cmp.Diff(want, Best(in)); diff != "" {
		t.Errorf("Best (-want +got):\n%s", diff)
	}
	if _, err := Compare(Best(in), Best(in)); err != nil {
		t.Errorf("Compare after Best: %v", err)
	}
}
