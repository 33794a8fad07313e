package health

import "fmt"

// ringLinks are the ring links of s (sorted by rank, one per rank): rank
// r → r+1 mod N, none with one rank.
func ringLinks(s []Sample) []Link {
	if len(s) < 2 {
		return []Link{}
	}
	out := make([]Link, len(s))
	for i, x := range s {
		y := s[(i+1)%len(s)]
		out[i] = Link{From: x.Rank, To: y.Rank, FromNode: x.Node, ToNode: y.Node, GBs: x.NextGBs, Error: x.NextErr}
	}
	return out
}

// ringMinLinks: ring links are compared from 3 (with 2 ranks the two
// links are one pair's two directions, which share whatever slows it).
const ringMinLinks = 3

// ringOutliers names a link that failed, and (unless the machine is
// crowded) a link at th.LinkFraction of the other measured links' median
// or less.
func ringOutliers(links []Link, th Thresholds, crowded bool) []Outlier {
	var out []Outlier
	for i, l := range links {
		o := Outlier{Rank: l.From, Node: l.FromNode, Ranks: []int{l.From, l.To}, Metric: "ring_link", Value: l.GBs}
		who := fmt.Sprintf("link rank %d → rank %d (%s → %s)", l.From, l.To, l.FromNode, l.ToNode)
		if l.Error != "" {
			o.Text = who + ": not measured: " + l.Error
			out = append(out, o)
			continue
		}
		if crowded || len(links) < ringMinLinks || !(l.GBs > 0) {
			continue
		}
		var others []float64
		for j, m := range links {
			if j != i && m.GBs > 0 {
				others = append(others, m.GBs)
			}
		}
		if o.Median = median(others); !(o.Median > 0) {
			continue
		}
		if o.Ratio = l.GBs / o.Median; o.Ratio <= th.LinkFraction {
			o.Text = fmt.Sprintf("%s at %.2f× the other links' median (%s vs %s)", who, o.Ratio, gbs(l.GBs), gbs(o.Median))
			out = append(out, o)
		}
	}
	return out
}
