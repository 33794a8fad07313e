package bench

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/batchkit/batchkit/internal/outfile"
	"github.com/batchkit/batchkit/internal/plotfile"
)

// PlotWidth and PlotHeight are the plot's size (a PNG is 96 dpi: 768×480).
const (
	PlotWidth  = 8 * vg.Inch
	PlotHeight = 5 * vg.Inch
)

// PlotFile writes Plot's image to path, in the format its extension names.
// An existing file is refused (fs.ErrExist) unless replace; a replaced file
// is swapped in whole and keeps its mode and owner; what is not a regular
// file is refused (*outfile.NotRegularError). See outfile.Write.
func PlotFile(path string, results []Result, replace bool) error {
	format, err := plotfile.Format(path)
	if err != nil {
		return err
	}
	var img bytes.Buffer
	if err := Plot(&img, format, results); err != nil {
		return err
	}
	return outfile.Write(path, img.Bytes(), 0o644, replace)
}

// Plot draws bus bandwidth against message size (log2 axis), one line per
// series (Result.Series; the op, dtype or ranks are added to the legend when
// they differ between series), and writes the image to w in format.
func Plot(w io.Writer, format string, results []Result) error {
	ss, err := group(results)
	if err != nil {
		return err
	}
	if len(ss) == 0 {
		return fmt.Errorf("nothing to plot")
	}
	p := plot.New()
	common, vary := commonParts(ss)
	p.Title.Text = "bus bandwidth"
	if common != "" {
		p.Title.Text = common + ": bus bandwidth"
	}
	p.X.Label.Text = "message size"
	p.Y.Label.Text = "busbw (GB/s)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())

	lo, hi, top := math.Inf(1), math.Inf(-1), 0.0
	for i, s := range ss {
		rs := slices.Clone(s.results)
		slices.SortFunc(rs, func(a, b Result) int { return cmp.Compare(a.Bytes, b.Bytes) })
		xys := make(plotter.XYs, len(rs))
		for j, r := range rs {
			xys[j] = plotter.XY{X: float64(r.Bytes), Y: r.BusBW}
			lo, hi, top = math.Min(lo, xys[j].X), math.Max(hi, xys[j].X), math.Max(top, r.BusBW)
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("series %s: %w", s.key.Series, err)
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(legendName(s.key, vary), line, points)
	}
	// A log axis cannot include 0, which gonum's widening of an empty range
	// (one size only) would reach.
	if lo == hi {
		lo, hi = lo/2, hi*2
	}
	p.X.Min, p.X.Max = lo, hi
	p.Y.Min = 0
	if top == 0 {
		top = 1
	}
	p.Y.Max = top * 1.05

	wt, err := p.WriterTo(PlotWidth, PlotHeight, format)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// variation says which of op, dtype and ranks differ between series.
type variation struct{ op, dtype, ranks bool }

// commonParts is the title text for what all series share, and what varies.
func commonParts(ss []series) (string, variation) {
	first := ss[0].key
	var v variation
	for _, s := range ss[1:] {
		v.op = v.op || s.key.Op != first.Op
		v.dtype = v.dtype || s.key.DType != first.DType
		v.ranks = v.ranks || s.key.Ranks != first.Ranks
	}
	var parts []string
	if !v.op {
		parts = append(parts, first.Op)
	}
	if !v.dtype {
		parts = append(parts, first.DType)
	}
	title := strings.Join(parts, " ")
	if !v.ranks {
		if title != "" {
			title += ", "
		}
		title += plural(first.Ranks, "rank")
	}
	return title, v
}

func legendName(k seriesKey, v variation) string {
	parts := []string{k.Series}
	if v.op {
		parts = append(parts, k.Op)
	}
	if v.dtype {
		parts = append(parts, k.DType)
	}
	if v.ranks {
		parts = append(parts, plural(k.Ranks, "rank"))
	}
	return strings.Join(parts, " ")
}

// sizeTicks marks every power of two in range and labels every 1st, 2nd,
// 5th or 10th one (aligned, so that 1 KiB and 1 MiB are labelled when in
// range) with at most 12 labels.
type sizeTicks struct{}

func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	first := max(0, int(math.Ceil(math.Log2(lo))))
	last := int(math.Floor(math.Log2(hi)))
	if last < first {
		return []plot.Tick{{Value: lo, Label: FormatSize(int64(lo))}, {Value: hi, Label: FormatSize(int64(hi))}}
	}
	step := 10
	for _, s := range []int{1, 2, 5} {
		if (last-first)/s+1 <= 12 {
			step = s
			break
		}
	}
	var ticks []plot.Tick
	for e := first; e <= last && e < 63; e++ {
		t := plot.Tick{Value: math.Ldexp(1, e)}
		if e%step == 0 {
			t.Label = FormatSize(int64(1) << e)
		}
		ticks = append(ticks, t)
	}
	return ticks
}
