// Package health is the health report of batchkit train and bench
// (--report): where each rank's time went, per rank and per node, and the
// ranks and nodes that stand out, named in words a site admin can act on
// ("node2: compute 1.8× the others' median").
//
//   - report.go: Analyze, a pure function from every rank's Sample to the
//     Report (rows, outliers), and its text; the JSON is the Report itself.
//   - probe.go: Probe, the trainer.Comm wrapper that times a rank's steps
//     (compute, waiting on the slowest rank, communication), and
//     ProbeLinks, the bandwidth of a broadcast from each rank.
//   - ring.go: ProbeRing, each rank's ring link to the next rank, one pair
//     at a time over connections of its own (ringcard.go: what each rank
//     announces); ringreport.go: the links' rows and outliers.
//   - gather.go: Gather, every rank's Sample to every rank (Allgather).
//
// The measurement and the outlier rule are in docs/reference/train.md,
// "Health report".
package health

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Sample is one rank's figures over a run. Times are in seconds, summed over
// the run's steps (bench: over its timed iterations).
type Sample struct {
	Rank int
	Node string // the launcher's node name (NodeName)
	// Host and CPUs: the machine and the CPUs the rank may run on (Here).
	Host  string
	CPUs  []int
	Steps int
	// Compute: the step's time outside the collectives. Wait: the time in
	// the barrier before the step's first collective, i.e. waiting for the
	// slowest rank to arrive. Comm: the time in the collectives once every
	// rank has arrived.
	Compute, Wait, Comm float64
	// ComputeStep is the median step's compute: the figure a rank's
	// compute is compared by (stepMedian says why).
	ComputeStep float64
	// LinkGBs is the bandwidth of a broadcast from this rank (GB/s,
	// ProbeLinks); 0 when not measured.
	LinkGBs float64
	// NextGBs is the bandwidth of this rank's ring link to rank+1 mod N
	// (GB/s, ProbeRing), NextErr why it was not measured ("" when it
	// was, or was not tried).
	NextGBs float64
	NextErr string
}

// Thresholds decide what is named an outlier.
type Thresholds struct {
	// Factor: a rank's compute is named at Factor × the others' median or
	// more.
	Factor float64 `json:"factor"`
	// LinkFraction: a rank's link is named at this fraction of the
	// others' median or less.
	LinkFraction float64 `json:"link_fraction"`
	// MinExcess: and its median step's compute must exceed the others'
	// by this many seconds over the run's steps: below it, other work that
	// took a core for part of a short run would be named.
	MinExcess float64 `json:"min_excess_seconds"`
}

// DefaultThresholds: compute 1.5× the others' median and 0.5 s over the
// run, a link at half the others' median. Two even ranks on this
// project's loaded 2-core machine differed by up to 2.3× a median step
// (other work held a core for part of a run) but at most 0.29 s over
// the run, their links (a broadcast through shared memory, CPU-bound) by
// up to 1.6×; a rank on a busy core was 3.8× slower and more, 1.4 s and
// more over the run (docs/reference/train.md, "Health report").
var DefaultThresholds = Thresholds{Factor: 1.5, LinkFraction: 0.5, MinExcess: 0.5}

// Report is the health report, as --format json prints it.
type Report struct {
	Thresholds Thresholds `json:"thresholds"`
	Ranks      []Row      `json:"ranks"`
	Nodes      []Row      `json:"nodes"`
	Outliers   []Outlier  `json:"outliers"` // empty: nothing stands out
	// Crowded: machines with more ranks than CPUs. Nothing is then
	// compared (no outliers): who waits for a CPU is chance, in compute
	// and in the link probe's copies alike. A ring link that could not be
	// measured is still named.
	Crowded []Crowded `json:"crowded"`
	// Links: the ring links, rank r → r+1 mod N, in rank order (none with
	// one rank).
	Links []Link `json:"links"`
}

// Link is one ring link (ProbeRing): its ends, their nodes, its
// bandwidth, or why it was not measured.
type Link struct {
	From     int     `json:"from"`
	To       int     `json:"to"`
	FromNode string  `json:"from_node"`
	ToNode   string  `json:"to_node"`
	GBs      float64 `json:"gbs"`             // 0: not measured
	Error    string  `json:"error,omitempty"` // why not
}

// Row is one rank's figures, or one node's (the mean over its ranks).
// Rank is -1 in a node's row; Ranks lists a node's ranks.
type Row struct {
	Rank        int     `json:"rank"`
	Node        string  `json:"node"`
	Host        string  `json:"host,omitempty"` // a rank's machine
	Ranks       []int   `json:"ranks,omitempty"`
	Steps       int     `json:"steps"`
	Compute     float64 `json:"compute_seconds"`
	ComputeStep float64 `json:"compute_step_seconds"`
	Wait        float64 `json:"wait_seconds"`
	Comm        float64 `json:"comm_seconds"`
	LinkGBs     float64 `json:"link_gbs"`
	// ToNextGBs and FromPrevGBs: the ring links out to rank+1 and in
	// from rank−1 (a rank's); a node's, the mean of its ranks'.
	ToNextGBs   float64 `json:"to_next_gbs"`
	FromPrevGBs float64 `json:"from_prev_gbs"`
}

// Outlier is a rank or node that stands out against the others' Median:
// Metric "compute" (the median step's, seconds; Ratio ≥ Factor) or "link"
// (GB/s; Ratio ≤ LinkFraction). Rank is -1 and Ranks lists a node's ranks
// when every rank of the node stands out: the node is then named, not its
// ranks. Metric "ring_link" is a ring link at LinkFraction of the other
// links' median or less, or not measured (Value 0): Rank and Node are its
// sender's, Ranks its two ends.
type Outlier struct {
	Rank   int     `json:"rank"` // -1 for a node
	Node   string  `json:"node"`
	Ranks  []int   `json:"ranks"`
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	Median float64 `json:"median"`
	Ratio  float64 `json:"ratio"`
	Text   string  `json:"text"`
}

// metric is one column the outliers are looked for in.
type metric struct {
	name   string
	value  func(Sample) float64
	high   bool // a high value is the bad one (compute); else a low one (link)
	format func(float64) string
	per    string // what the value is of, in the text
	// minRanks: below this world size nothing is named. Two ranks'
	// broadcasts cross the same link both ways, and a rank that is slow to
	// receive makes the other's look slow (measured: a rank on a busy
	// core made the other's link 33 % of its own).
	minRanks int
}

var metrics = []metric{
	{name: "compute", value: func(s Sample) float64 { return s.ComputeStep }, high: true, format: seconds, per: " a step", minRanks: 2},
	{name: "link", value: func(s Sample) float64 { return s.LinkGBs }, format: gbs, minRanks: 3},
}

// Analyze builds the report of every rank's sample (any order; one per
// rank). It is pure: the same samples give the same report.
func Analyze(samples []Sample, th Thresholds) Report {
	s := slices.Clone(samples)
	slices.SortFunc(s, func(a, b Sample) int { return a.Rank - b.Rank })
	links := ringLinks(s)
	rep := Report{Thresholds: th, Ranks: make([]Row, 0, len(s)), Outliers: []Outlier{},
		Crowded: crowded(s), Links: links}
	for i, x := range s {
		row := Row{Rank: x.Rank, Node: x.Node, Host: x.Host, Steps: x.Steps, Compute: x.Compute,
			ComputeStep: x.ComputeStep, Wait: x.Wait, Comm: x.Comm, LinkGBs: x.LinkGBs}
		if len(links) > 0 {
			row.ToNextGBs, row.FromPrevGBs = links[i].GBs, links[(i+len(s)-1)%len(s)].GBs
		}
		rep.Ranks = append(rep.Ranks, row)
	}
	rep.Nodes = nodeRows(rep.Ranks)
	for _, m := range metrics {
		if len(rep.Crowded) > 0 {
			break
		}
		rep.Outliers = append(rep.Outliers, outliers(s, m, th)...)
	}
	rep.Outliers = append(rep.Outliers, ringOutliers(links, th, len(rep.Crowded) > 0)...)
	return rep
}

// nodeRows are the nodes in order of their first rank, each the mean of
// its ranks' rows.
func nodeRows(ranks []Row) []Row {
	var rows []Row
	at := map[string]int{}
	for _, x := range ranks {
		i, ok := at[x.Node]
		if !ok {
			i, at[x.Node] = len(rows), len(rows)
			rows = append(rows, Row{Rank: -1, Node: x.Node, Steps: x.Steps})
		}
		r := &rows[i]
		r.Ranks = append(r.Ranks, x.Rank)
		r.Compute += x.Compute
		r.ComputeStep += x.ComputeStep
		r.Wait += x.Wait
		r.Comm += x.Comm
		r.LinkGBs += x.LinkGBs
		r.ToNextGBs += x.ToNextGBs
		r.FromPrevGBs += x.FromPrevGBs
	}
	for i := range rows {
		n := float64(len(rows[i].Ranks))
		rows[i].Compute /= n
		rows[i].ComputeStep /= n
		rows[i].Wait /= n
		rows[i].Comm /= n
		rows[i].LinkGBs /= n
		rows[i].ToNextGBs /= n
		rows[i].FromPrevGBs /= n
	}
	return rows
}

// outliers are the ranks whose m stands out against the median of the
// other ranks; when every rank of a node stands out (and not every rank of
// the job), the node is named instead.
func outliers(s []Sample, m metric, th Thresholds) []Outlier {
	if len(s) < m.minRanks {
		return nil
	}
	var flagged []Outlier
	for i, x := range s {
		v := m.value(x)
		others := make([]float64, 0, len(s)-1)
		for j, y := range s {
			if j != i {
				others = append(others, m.value(y))
			}
		}
		med := median(others)
		if !(v > 0 && med > 0) { // not measured, or nothing to compare with
			continue
		}
		ratio := v / med
		bad := ratio <= th.LinkFraction
		if m.high {
			bad = ratio >= th.Factor && (v-med)*float64(x.Steps) >= th.MinExcess
		}
		if bad {
			flagged = append(flagged, Outlier{Rank: x.Rank, Node: x.Node, Ranks: []int{x.Rank}, Metric: m.name,
				Value: v, Median: med, Ratio: ratio})
		}
	}
	return byNode(s, flagged, m)
}

// byNode names a node whose ranks all stand out (the node's mean against
// the median of the other ranks), and the ranks alone otherwise; then
// writes each one's text.
func byNode(s []Sample, flagged []Outlier, m metric) []Outlier {
	var out []Outlier
	done := map[string]bool{}
	for _, o := range flagged {
		if done[o.Node] {
			continue
		}
		var mine, theirs, others []float64
		var ranks []int
		for _, x := range s {
			if x.Node == o.Node {
				mine, ranks = append(mine, m.value(x)), append(ranks, x.Rank)
			} else {
				others = append(others, m.value(x))
			}
		}
		for _, f := range flagged {
			if f.Node == o.Node {
				theirs = append(theirs, f.Value)
			}
		}
		if len(theirs) == len(mine) && len(others) > 0 {
			done[o.Node] = true
			v, med := mean(mine), median(others)
			o = Outlier{Rank: -1, Node: o.Node, Ranks: ranks, Metric: m.name, Value: v, Median: med, Ratio: v / med}
		}
		o.Text = text(o, m)
		out = append(out, o)
	}
	return out
}

func text(o Outlier, m metric) string {
	who := fmt.Sprintf("rank %d (%s)", o.Rank, o.Node)
	if o.Rank < 0 {
		who = fmt.Sprintf("%s (%s)", o.Node, ranksText(o.Ranks))
	}
	if m.high {
		return fmt.Sprintf("%s: %s %.1f× the others' median (%s vs %s%s)", who, m.name, o.Ratio, m.format(o.Value), m.format(o.Median), m.per)
	}
	return fmt.Sprintf("%s: %s at %.0f %% of the others' median (%s vs %s%s)", who, m.name, 100*o.Ratio, m.format(o.Value), m.format(o.Median), m.per)
}

// WriteText writes the report for people: the ranks, the nodes (when more
// than one), then the outliers or a line saying there are none.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "health: per rank, seconds over %s (step: the median step's compute; link: a broadcast from the rank; next, prev: its ring links to rank+1, from rank-1)\n", plural(stepsOf(r.Ranks), "step"))
	b.WriteString(table("rank", r.Ranks, func(x Row) string { return fmt.Sprint(x.Rank) }))
	if len(r.Nodes) > 1 {
		b.WriteString("health: per node (mean of its ranks)\n")
		b.WriteString(table("node", r.Nodes, func(x Row) string { return x.Node }))
		b.WriteString(crossNode(r.Links))
	}
	for _, c := range r.Crowded {
		fmt.Fprintf(&b, "health: %s runs %s on %s: ranks wait for a CPU by chance, nothing is compared (one rank a CPU: batchkit exec --pin)\n",
			c.Host, plural(len(c.Ranks), "rank"), plural(c.CPUs, "CPU"))
	}
	switch {
	case len(r.Ranks) < 2:
		b.WriteString("health: one rank: nothing to compare\n")
	case len(r.Crowded) > 0 && len(r.Outliers) == 0: // said above
	case len(r.Outliers) == 0:
		note := ""
		if len(r.Ranks) < metrics[1].minRanks {
			note = "; links are compared from 3 ranks"
		}
		fmt.Fprintf(&b, "health: no outliers (compute ≥ %.1f× or link ≤ %.0f %% of the others' median%s)\n",
			r.Thresholds.Factor, 100*r.Thresholds.LinkFraction, note)
	default:
		for _, o := range r.Outliers {
			fmt.Fprintf(&b, "health: outlier: %s\n", o.Text)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// crossNode lists the ring links between nodes.
func crossNode(links []Link) string {
	var b strings.Builder
	for _, l := range links {
		if l.FromNode != l.ToNode {
			fmt.Fprintf(&b, "  rank %d → rank %d (%s → %s) %s GB/s\n", l.From, l.To, l.FromNode, l.ToNode, orDash(l.GBs))
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "health: ring links between nodes\n" + b.String()
}

func table(first string, rows []Row, key func(Row) string) string {
	var b strings.Builder
	second := "node"
	if first == "node" {
		second = "ranks"
	}
	fmt.Fprintf(&b, "  %-12s %-12s %10s %10s %10s %10s %10s %10s %10s\n", first, second, "compute", "step (ms)", "wait", "comm", "link GB/s", "next GB/s", "prev GB/s")
	for _, x := range rows {
		node := x.Node
		if first == "node" {
			node = joinInts(x.Ranks)
		}
		fmt.Fprintf(&b, "  %-12s %-12s %10.3f %10.3f %10.3f %10.3f %10s %10s %10s\n", key(x), node, x.Compute, 1e3*x.ComputeStep, x.Wait, x.Comm,
			orDash(x.LinkGBs), orDash(x.ToNextGBs), orDash(x.FromPrevGBs))
	}
	return b.String()
}

// orDash is a bandwidth, or - when not measured.
func orDash(gbs float64) string {
	if gbs > 0 {
		return fmt.Sprintf("%.3f", gbs)
	}
	return "-"
}

func stepsOf(rows []Row) int {
	if len(rows) == 0 {
		return 0
	}
	return rows[0].Steps
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mean(v []float64) float64 {
	var t float64
	for _, x := range v {
		t += x
	}
	return t / float64(len(v))
}

func seconds(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.0f ms", v*1e3)
	}
	return fmt.Sprintf("%.2f s", v)
}

func gbs(v float64) string { return fmt.Sprintf("%.3f GB/s", v) }

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func ranksText(r []int) string {
	if len(r) == 1 {
		return fmt.Sprintf("rank %d", r[0])
	}
	return "ranks " + joinInts(r)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
