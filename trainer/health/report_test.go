package health

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// next is s with its ring link to the next rank at gbs.
func next(s Sample, gbs float64) Sample { s.NextGBs = gbs; return s }

// rank is a sample of 100 even steps.
func rank(r int, node string, compute, link float64) Sample {
	return Sample{Rank: r, Node: node, Steps: 100, Compute: compute, ComputeStep: compute / 100, Wait: 0.01, Comm: 0.05, LinkGBs: link}
}

func TestAnalyzeOutliers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []Sample
		want    []string // the outliers' texts
	}{
		{"one rank: nothing to compare", []Sample{rank(0, "a", 1, 0)}, nil},
		{"two even ranks", []Sample{rank(0, "a", 1, 2), rank(1, "a", 1.1, 1.9)}, nil},
		// Both broadcasts of two ranks cross the same link.
		{"two ranks' links are not compared", []Sample{rank(0, "a", 1, 2), rank(1, "a", 1, 0.5)}, nil},
		// What a loaded 2-core machine gives: up to ~1.3x apart in
		// compute and link, and no name.
		{"noisy, no outlier", []Sample{rank(0, "node1", 1.00, 2.1), rank(1, "node1", 1.31, 1.6), rank(2, "node2", 0.92, 2.4), rank(3, "node2", 1.18, 1.7)}, nil},
		{"a slow rank", []Sample{rank(0, "node1", 1, 2), rank(1, "node1", 1.1, 2), rank(2, "node2", 0.95, 2), rank(3, "node2", 1.9, 2)},
			[]string{"rank 3 (node2): compute 1.9× the others' median (19 ms vs 10 ms a step)"}},
		{"a slow node", []Sample{rank(0, "node1", 1, 2), rank(1, "node1", 1, 2), rank(2, "node2", 1.8, 2), rank(3, "node2", 1.8, 2)},
			[]string{"node2 (ranks 2,3): compute 1.8× the others' median (18 ms vs 10 ms a step)"}},
		{"one rank a node, the second slow", []Sample{rank(0, "node1", 0.5, 2), rank(1, "node2", 1.5, 2)},
			[]string{"node2 (rank 1): compute 3.0× the others' median (15 ms vs 5 ms a step)"}},
		{"a link at 60 %: noise", []Sample{rank(0, "n", 1, 2), rank(1, "n", 1, 2.2), rank(2, "n", 1, 1.9), rank(3, "n", 1, 1.2)}, nil},
		{"a slow link", []Sample{rank(0, "n", 1, 2), rank(1, "n", 1, 2.2), rank(2, "n", 1, 1.9), rank(3, "n", 1, 0.8)},
			[]string{"rank 3 (n): link at 40 % of the others' median (0.800 GB/s vs 2.000 GB/s)"}},
		// 3×, but 0.4 s more over the run: other work that held a core
		// for part of a short run.
		{"below the excess floor", []Sample{rank(0, "n", 0.2, 0), rank(1, "n", 0.2, 0), rank(2, "n", 0.6, 0)}, nil},
		{"links not measured", []Sample{rank(0, "n", 1, 0), rank(1, "n", 1, 0), rank(2, "n", 1, 0)}, nil},
		{"just under the thresholds", []Sample{rank(0, "n", 2, 2), rank(1, "n", 2, 2), rank(2, "n", 2.98, 1.01)}, nil},
		{"at the thresholds", []Sample{rank(0, "n", 2, 3), rank(1, "n", 2, 3), rank(2, "n", 3, 1.5)},
			[]string{"rank 2 (n): compute 1.5× the others' median (30 ms vs 20 ms a step)", "rank 2 (n): link at 50 % of the others' median (1.500 GB/s vs 3.000 GB/s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, outlierTexts(tc.samples)); diff != "" {
				t.Errorf("outliers (-want +got):\n%s", diff)
			}
		})
	}
}

// Four ranks on a machine of two CPUs: who waits for a CPU is chance, so
// nothing is compared (not even a link at 25 %) and the text says why. Two
// ranks pinned to a CPU each are not crowded.
func TestAnalyzeCrowded(t *testing.T) {
	on := func(s Sample, host string, cpus ...int) Sample { s.Host, s.CPUs = host, cpus; return s }
	crowdedRun := []Sample{on(rank(0, "node1", 1, 2), "vm", 0, 1), on(rank(1, "node1", 2, 2), "vm", 0, 1),
		on(rank(2, "node2", 1, 2), "vm", 0, 1), on(rank(3, "node2", 1, 0.5), "vm", 0, 1)}
	rep := Analyze(crowdedRun, DefaultThresholds)
	if diff := cmp.Diff([]Crowded{{Host: "vm", Ranks: []int{0, 1, 2, 3}, CPUs: 2}}, rep.Crowded); diff != "" {
		t.Errorf("crowded (-want +got):\n%s", diff)
	}
	if len(rep.Outliers) != 0 {
		t.Errorf("outliers %+v on a crowded machine: want none", rep.Outliers)
	}
	var b strings.Builder
	rep.WriteText(&b)
	if want := "\nhealth: vm runs 4 ranks on 2 CPUs: ranks wait for a CPU by chance, nothing is compared (one rank a CPU: batchkit exec --pin)\n"; !strings.HasSuffix(b.String(), want) {
		t.Errorf("text %q: want it to end %q", b.String(), want)
	}

	pinned := []Sample{on(rank(0, "vm", 1, 0), "vm", 0), on(rank(1, "vm", 2, 0), "vm", 1)}
	if rep := Analyze(pinned, DefaultThresholds); len(rep.Crowded) != 0 || len(rep.Outliers) != 1 {
		t.Errorf("two ranks pinned to a CPU each: crowded %v, outliers %v: want none, and rank 1 named", rep.Crowded, rep.Outliers)
	}
}

func TestAnalyzeRows(t *testing.T) {
	got := Analyze([]Sample{next(rank(1, "node1", 3, 1), 2), next(rank(0, "node1", 1, 3), 1), next(rank(2, "node2", 2, 2), 4)}, DefaultThresholds)
	want := Report{Thresholds: DefaultThresholds,
		Ranks: []Row{
			{Rank: 0, Node: "node1", Steps: 100, Compute: 1, ComputeStep: 0.01, Wait: 0.01, Comm: 0.05, LinkGBs: 3, ToNextGBs: 1, FromPrevGBs: 4},
			{Rank: 1, Node: "node1", Steps: 100, Compute: 3, ComputeStep: 0.03, Wait: 0.01, Comm: 0.05, LinkGBs: 1, ToNextGBs: 2, FromPrevGBs: 1},
			{Rank: 2, Node: "node2", Steps: 100, Compute: 2, ComputeStep: 0.02, Wait: 0.01, Comm: 0.05, LinkGBs: 2, ToNextGBs: 4, FromPrevGBs: 2},
		},
		Nodes: []Row{
			{Rank: -1, Node: "node1", Ranks: []int{0, 1}, Steps: 100, Compute: 2, ComputeStep: 0.02, Wait: 0.01, Comm: 0.05, LinkGBs: 2, ToNextGBs: 1.5, FromPrevGBs: 2.5},
			{Rank: -1, Node: "node2", Ranks: []int{2}, Steps: 100, Compute: 2, ComputeStep: 0.02, Wait: 0.01, Comm: 0.05, LinkGBs: 2, ToNextGBs: 4, FromPrevGBs: 2},
		},
		Outliers: []Outlier{
			{Rank: 1, Node: "node1", Ranks: []int{1}, Metric: "compute", Value: 0.03, Median: 0.015, Ratio: 2,
				Text: "rank 1 (node1): compute 2.0× the others' median (30 ms vs 15 ms a step)"},
			{Rank: 1, Node: "node1", Ranks: []int{1}, Metric: "link", Value: 1, Median: 2.5, Ratio: 0.4,
				Text: "rank 1 (node1): link at 40 % of the others' median (1.000 GB/s vs 2.500 GB/s)"},
			{Rank: 0, Node: "node1", Ranks: []int{0, 1}, Metric: "ring_link", Value: 1, Median: 3, Ratio: 1.0 / 3,
				Text: "link rank 0 → rank 1 (node1 → node1) at 0.33× the other links' median (1.000 GB/s vs 3.000 GB/s)"},
		},
		Crowded: []Crowded{},
		Links: []Link{
			{From: 0, To: 1, FromNode: "node1", ToNode: "node1", GBs: 1},
			{From: 1, To: 2, FromNode: "node1", ToNode: "node2", GBs: 2},
			{From: 2, To: 0, FromNode: "node2", ToNode: "node1", GBs: 4},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

func TestWriteText(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []Sample
		want    string
	}{
		{"one rank", []Sample{{Rank: 0, Node: "vm", Steps: 1, Compute: 0.5, ComputeStep: 0.5}}, `health: per rank, seconds over 1 step (step: the median step's compute; link: a broadcast from the rank; next, prev: its ring links to rank+1, from rank-1)
  rank         node            compute  step (ms)       wait       comm  link GB/s  next GB/s  prev GB/s
  0            vm                0.500    500.000      0.000      0.000          -          -          -
health: one rank: nothing to compare
`},
		{"no outliers, two nodes", []Sample{next(rank(0, "node1", 1, 2), 1.5), next(rank(1, "node2", 1.1, 2.1), 1.25)}, `health: per rank, seconds over 100 steps (step: the median step's compute; link: a broadcast from the rank; next, prev: its ring links to rank+1, from rank-1)
  rank         node            compute  step (ms)       wait       comm  link GB/s  next GB/s  prev GB/s
  0            node1             1.000     10.000      0.010      0.050      2.000      1.500      1.250
  1            node2             1.100     11.000      0.010      0.050      2.100      1.250      1.500
health: per node (mean of its ranks)
  node         ranks           compute  step (ms)       wait       comm  link GB/s  next GB/s  prev GB/s
  node1        0                 1.000     10.000      0.010      0.050      2.000      1.500      1.250
  node2        1                 1.100     11.000      0.010      0.050      2.100      1.250      1.500
health: ring links between nodes
  rank 0 → rank 1 (node1 → node2) 1.500 GB/s
  rank 1 → rank 0 (node2 → node1) 1.250 GB/s
health: no outliers (compute ≥ 1.5× or link ≤ 50 % of the others' median; links are compared from 3 ranks)
`},
		{"an outlier", []Sample{rank(0, "vm", 1, 0), rank(1, "vm", 2, 0)}, `health: per rank, seconds over 100 steps (step: the median step's compute; link: a broadcast from the rank; next, prev: its ring links to rank+1, from rank-1)
  rank         node            compute  step (ms)       wait       comm  link GB/s  next GB/s  prev GB/s
  0            vm                1.000     10.000      0.010      0.050          -          -          -
  1            vm                2.000     20.000      0.010      0.050          -          -          -
health: outlier: rank 1 (vm): compute 2.0× the others' median (20 ms vs 10 ms a step)
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := Analyze(tc.samples, DefaultThresholds).WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
		})
	}
}

// The median step of a run with a few steps disturbed is the undisturbed
// one (to the histogram's 2 %), and its compute is what is compared.
func TestStepMedian(t *testing.T) {
	var m stepMedian
	for i := range 100 {
		d := 10 * time.Millisecond
		if i%10 == 0 {
			d = 300 * time.Millisecond // descheduled
		}
		m.add(d)
	}
	if got := m.seconds(); got < 0.0098 || got > 0.0102 {
		t.Errorf("median %v s, want 10 ms ± 2 %%", got)
	}
	if got := (&stepMedian{}).seconds(); got != 0 {
		t.Errorf("median of nothing %v, want 0", got)
	}
}

func TestLinkReps(t *testing.T) {
	var got []int
	for _, n := range []int{1, 2, 25, 26, 64, 256, 512} {
		got = append(got, linkReps(n))
	}
	if diff := cmp.Diff([]int{10, 10, 10, 9, 4, 1, 1}, got); diff != "" {
		t.Errorf("reps for 1, 2, 25, 26, 64, 256, 512 ranks (-want +got):\n%s", diff)
	}
}

// outlierTexts is what Analyze names in samples, in its order.
func outlierTexts(samples []Sample) []string {
	var got []string
	for _, o := range Analyze(samples, DefaultThresholds).Outliers {
		got = append(got, o.Text)
	}
	return got
}
