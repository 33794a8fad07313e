package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/batchkit/batchkit/internal/closed"
	"github.com/batchkit/batchkit/trainer/health"
)

// Format is an output format. It is a closed set.
type Format string

const (
	Text Format = "text" // a header and one aligned row per size
	JSON Format = "json" // one Result object per line
)

// Formats lists the output formats.
var Formats = []Format{Text, JSON}

// ParseFormat reads "text" or "json".
func ParseFormat(s string) (Format, error) { return closed.Parse("format", s, Formats) }

// Writer writes results as they come, in a Format. In text, a header opens
// each series (op, dtype, ranks, backend).
type Writer struct {
	w       io.Writer
	format  Format
	started bool
	last    seriesKey
}

// NewWriter writes to w in format f.
func NewWriter(w io.Writer, f Format) *Writer { return &Writer{w: w, format: f} }

const (
	textColumns = "#%11s %12s %7s %7s %12s %12s %12s %12s %12s\n"
	textRow     = "%12s %12d %7d %7d %12.2f %12.2f %12.2f %12.4f %12.4f\n"
)

// Write writes one result.
func (w *Writer) Write(r Result) error {
	if w.format == JSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w.w, "%s\n", b)
		return err
	}
	var b strings.Builder
	if k := keyOf(r); !w.started || k != w.last {
		if w.started {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "# %s %s, %s, backend %s\n", r.Op, r.DType, plural(r.Ranks, "rank"), r.Series())
		if r.Ranks == 1 {
			b.WriteString("# one rank: busbw = algbw (nothing crosses a link)\n")
		}
		fmt.Fprintf(&b, textColumns, "size", "count", "iters", "warmup", "avg(us)", "min(us)", "max(us)", "algbw(GB/s)", "busbw(GB/s)")
		w.started, w.last = true, k
	}
	fmt.Fprintf(&b, textRow, FormatSize(r.Bytes), r.Count, r.Iters, r.Warmup, r.AvgUs, r.MinUs, r.MaxUs, r.AlgBW, r.BusBW)
	_, err := io.WriteString(w.w, b.String())
	return err
}

// WriteHealth writes the health report after the results: its text after a
// blank line, or one JSON line {"health": ...} (ReadResults skips it).
func (w *Writer) WriteHealth(rep health.Report) error {
	if w.format == JSON {
		b, err := json.Marshal(struct {
			Health health.Report `json:"health"`
		}{rep})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w.w, "%s\n", b)
		return err
	}
	if _, err := io.WriteString(w.w, "\n"); err != nil {
		return err
	}
	return rep.WriteText(w.w)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Comparison sets one series of results beside a baseline series of the same
// op, dtype and world size, size by size.
type Comparison struct {
	Op, DType        string
	Ranks            int
	Series, Baseline string // their Series names
	Rows             []ComparisonRow
	// GeoMeanRatio is the geometric mean of the rows' BusBWRatio.
	GeoMeanRatio float64
}

// ComparisonRow is one size of a Comparison, also its JSON line.
type ComparisonRow struct {
	Op         string  `json:"op"`
	DType      string  `json:"dtype"`
	Ranks      int     `json:"ranks"`
	Bytes      int64   `json:"bytes"`
	Backend    string  `json:"backend"`     // this run's series
	RefBackend string  `json:"ref_backend"` // the baseline's series
	AvgUs      float64 `json:"avg_us"`
	RefAvgUs   float64 `json:"ref_avg_us"`
	DiffUs     float64 `json:"diff_us"` // AvgUs − RefAvgUs: positive when this run is slower
	BusBW      float64 `json:"busbw_gbs"`
	RefBusBW   float64 `json:"ref_busbw_gbs"`
	// BusBWRatio is this run's busbw over the baseline's, computed from the
	// times (RefAvgUs / AvgUs) so that it stays exact for tiny bandwidths:
	// above 1 this run is faster.
	BusBWRatio float64 `json:"busbw_ratio"`
}

// Compare pairs every series of results with every series of baseline that
// has the same op, dtype and ranks, on the sizes both have.
func Compare(results, baseline []Result) ([]Comparison, error) {
	this, err := group(results)
	if err != nil {
		return nil, err
	}
	ref, err := group(baseline)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	var out []Comparison
	for _, s := range this {
		for _, b := range ref {
			if s.key.Op != b.key.Op || s.key.DType != b.key.DType || s.key.Ranks != b.key.Ranks {
				continue
			}
			if c, ok := compareSeries(s, b); ok {
				out = append(out, c)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("nothing to compare: the results have %s, the baseline %s (same op, dtype, ranks and sizes needed)",
			describe(this), describe(ref))
	}
	return out, nil
}

func describe(ss []series) string {
	var parts []string
	for _, s := range ss {
		r := s.results
		parts = append(parts, fmt.Sprintf("%s %s %s %s %s..%s", s.key.Series, s.key.Op, s.key.DType,
			plural(s.key.Ranks, "rank"), FormatSize(r[0].Bytes), FormatSize(r[len(r)-1].Bytes)))
	}
	return strings.Join(parts, "; ")
}

func compareSeries(s, b series) (Comparison, bool) {
	refBy := map[int64]Result{}
	for _, r := range b.results {
		refBy[r.Bytes] = r
	}
	c := Comparison{Op: s.key.Op, DType: s.key.DType, Ranks: s.key.Ranks, Series: s.key.Series, Baseline: b.key.Series}
	logSum, n := 0.0, 0
	for _, r := range s.results {
		ref, ok := refBy[r.Bytes]
		if !ok {
			continue
		}
		row := ComparisonRow{
			Op: c.Op, DType: c.DType, Ranks: c.Ranks, Bytes: r.Bytes,
			Backend: c.Series, RefBackend: c.Baseline,
			AvgUs: r.AvgUs, RefAvgUs: ref.AvgUs, DiffUs: round(r.AvgUs-ref.AvgUs, 3),
			BusBW: r.BusBW, RefBusBW: ref.BusBW,
		}
		if r.AvgUs > 0 && ref.AvgUs > 0 {
			row.BusBWRatio = round(ref.AvgUs/r.AvgUs, 4)
			logSum += math.Log(ref.AvgUs / r.AvgUs)
			n++
		}
		c.Rows = append(c.Rows, row)
	}
	if n > 0 {
		c.GeoMeanRatio = round(math.Exp(logSum/float64(n)), 4)
	}
	return c, len(c.Rows) > 0
}

const (
	cmpColumns = "#%11s %12s %14s %10s %12s %17s %12s\n"
	cmpRow     = "%12s %12.2f %14.2f %10.2f %12.4f %17.4f %12.3f\n"
)

// WriteComparisons writes comparisons as tables (text) or as one
// ComparisonRow per line (json).
func WriteComparisons(w io.Writer, cs []Comparison, f Format) error {
	var b strings.Builder
	for i, c := range cs {
		if f == JSON {
			for _, r := range c.Rows {
				j, err := json.Marshal(r)
				if err != nil {
					return err
				}
				b.Write(j)
				b.WriteString("\n")
			}
			continue
		}
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "# %s %s, %s: %s vs %s (baseline)\n", c.Op, c.DType, plural(c.Ranks, "rank"), c.Series, c.Baseline)
		fmt.Fprintf(&b, cmpColumns, "size", "avg(us)", "base avg(us)", "diff(us)", "busbw(GB/s)", "base busbw(GB/s)", "busbw ratio")
		lo, hi := -1, -1
		for j, r := range c.Rows {
			fmt.Fprintf(&b, cmpRow, FormatSize(r.Bytes), r.AvgUs, r.RefAvgUs, r.DiffUs, r.BusBW, r.RefBusBW, r.BusBWRatio)
			if r.BusBWRatio > 0 && (lo < 0 || r.BusBWRatio < c.Rows[lo].BusBWRatio) {
				lo = j
			}
			if r.BusBWRatio > 0 && (hi < 0 || r.BusBWRatio > c.Rows[hi].BusBWRatio) {
				hi = j
			}
		}
		if lo >= 0 {
			fmt.Fprintf(&b, "# busbw ratio %s / %s: geometric mean %.3f over %s (min %.3f at %s, max %.3f at %s)\n",
				c.Series, c.Baseline, c.GeoMeanRatio, plural(len(c.Rows), "size"),
				c.Rows[lo].BusBWRatio, FormatSize(c.Rows[lo].Bytes), c.Rows[hi].BusBWRatio, FormatSize(c.Rows[hi].Bytes))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
