package health

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rank is a sample of 100 steps.
func rank(r int, node string, compute, link float64) Sample {
	return Sample{Rank: r, Node: node, Steps: 100, Compute: compute, Wait: 0.01, Comm: 0.05, LinkGBs: link}
}

func TestAnalyzeOutliers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []Sample
		want    []string // the outliers' texts
	}{
		{"one rank: nothing to compare", []Sample{rank(0, "a", 1, 0)}, nil},
		{"two even ranks", []Sample{rank(0, "a", 1, 2), rank(1, "a", 1.1, 1.9)}, nil},
		// What a loaded 2-core machine gives: up to ~1.3x apart in
		// compute and link, and no name.
		{"noisy, no outlier", []Sample{rank(0, "node1", 1.00, 2.1), rank(1, "node1", 1.31, 1.6), rank(2, "node2", 0.92, 2.4), rank(3, "node2", 1.18, 1.7)}, nil},
		{"a slow rank", []Sample{rank(0, "node1", 1, 2), rank(1, "node1", 1.1, 2), rank(2, "node2", 0.95, 2), rank(3, "node2", 1.9, 2)},
			[]string{"rank 3 (node2): compute 1.9× the others' median (1.90 s vs 1.00 s)"}},
		{"a slow node", []Sample{rank(0, "node1", 1, 2), rank(1, "node1", 1, 2), rank(2, "node2", 1.8, 2), rank(3, "node2", 1.8, 2)},
			[]string{"node2 (ranks 2,3): compute 1.8× the others' median (1.80 s vs 1.00 s)"}},
		{"one rank a node, the second slow", []Sample{rank(0, "node1", 0.5, 2), rank(1, "node2", 1.5, 2)},
			[]string{"node2 (rank 1): compute 3.0× the others' median (1.50 s vs 500 ms)"}},
		{"a link at 60 %: noise", []Sample{rank(0, "n", 1, 2), rank(1, "n", 1, 2.2), rank(2, "n", 1, 1.9), rank(3, "n", 1, 1.2)}, nil},
		{"a slow link", []Sample{rank(0, "n", 1, 2), rank(1, "n", 1, 2.2), rank(2, "n", 1, 1.9), rank(3, "n", 1, 0.8)},
			[]string{"rank 3 (n): link at 40 % of the others' median (0.800 GB/s vs 2.000 GB/s)"}},
		// 3x, but 10 ms more over the run: a short run's noise.
		{"below the excess floor", []Sample{rank(0, "n", 0.005, 0), rank(1, "n", 0.005, 0), rank(2, "n", 0.015, 0)}, nil},
		{"links not measured", []Sample{rank(0, "n", 1, 0), rank(1, "n", 1, 0), rank(2, "n", 1, 0)}, nil},
		{"just under the thresholds", []Sample{rank(0, "n", 1, 2), rank(1, "n", 1, 2), rank(2, "n", 1.49, 1.01)}, nil},
		{"at the thresholds", []Sample{rank(0, "n", 1, 3), rank(1, "n", 1, 3), rank(2, "n", 1.5, 1.5)},
			[]string{"rank 2 (n): compute 1.5× the others' median (1.50 s vs 1.00 s)", "rank 2 (n): link at 50 % of the others' median (1.500 GB/s vs 3.000 GB/s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, o := range Analyze(tc.samples, DefaultThresholds).Outliers {
				got = append(got, o.Text)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outliers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnalyzeRows(t *testing.T) {
	got := Analyze([]Sample{rank(1, "node1", 3, 1), rank(0, "node1", 1, 3), rank(2, "node2", 2, 2)}, DefaultThresholds)
	want := Report{Thresholds: DefaultThresholds,
		Ranks: []Row{
			{Rank: 0, Node: "node1", Steps: 100, Compute: 1, Wait: 0.01, Comm: 0.05, LinkGBs: 3},
			{Rank: 1, Node: "node1", Steps: 100, Compute: 3, Wait: 0.01, Comm: 0.05, LinkGBs: 1},
			{Rank: 2, Node: "node2", Steps: 100, Compute: 2, Wait: 0.01, Comm: 0.05, LinkGBs: 2},
		},
		Nodes: []Row{
			{Rank: -1, Node: "node1", Ranks: []int{0, 1}, Steps: 100, Compute: 2, Wait: 0.01, Comm: 0.05, LinkGBs: 2},
			{Rank: -1, Node: "node2", Ranks: []int{2}, Steps: 100, Compute: 2, Wait: 0.01, Comm: 0.05, LinkGBs: 2},
		},
		Outliers: []Outlier{
			{Rank: 1, Node: "node1", Ranks: []int{1}, Metric: "compute", Value: 3, Median: 1.5, Ratio: 2,
				Text: "rank 1 (node1): compute 2.0× the others' median (3.00 s vs 1.50 s)"},
			{Rank: 1, Node: "node1", Ranks: []int{1}, Metric: "link", Value: 1, Median: 2.5, Ratio: 0.4,
				Text: "rank 1 (node1): link at 40 % of the others' median (1.000 GB/s vs 2.500 GB/s)"},
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
		{"one rank", []Sample{{Rank: 0, Node: "vm", Steps: 1, Compute: 0.5}}, `health: per rank (seconds over 1 step; link: broadcast from the rank)
  rank         node            compute       wait       comm  link GB/s
  0            vm                0.500      0.000      0.000          -
health: one rank: nothing to compare
`},
		{"no outliers, two nodes", []Sample{rank(0, "node1", 1, 2), rank(1, "node2", 1.1, 2.1)}, `health: per rank (seconds over 100 steps; link: broadcast from the rank)
  rank         node            compute       wait       comm  link GB/s
  0            node1             1.000      0.010      0.050      2.000
  1            node2             1.100      0.010      0.050      2.100
health: per node (mean of its ranks)
  node         ranks           compute       wait       comm  link GB/s
  node1        0                 1.000      0.010      0.050      2.000
  node2        1                 1.100      0.010      0.050      2.100
health: no outliers (compute ≥ 1.5× or link ≤ 50 % of the others' median)
`},
		{"an outlier", []Sample{rank(0, "vm", 1, 0), rank(1, "vm", 2, 0)}, `health: per rank (seconds over 100 steps; link: broadcast from the rank)
  rank         node            compute       wait       comm  link GB/s
  0            vm                1.000      0.010      0.050          -
  1            vm                2.000      0.010      0.050          -
health: outlier: rank 1 (vm): compute 2.0× the others' median (2.00 s vs 1.00 s)
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
