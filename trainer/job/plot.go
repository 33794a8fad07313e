package job

import (
	"bytes"
	"fmt"
	"github.com/batchkit/batchkit/trainer"
	"io"
	"io/fs"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/batchkit/batchkit/internal/outfile"
	"github.com/batchkit/batchkit/internal/plotfile"
)

// History is what a run reports, for a plot: every step's loss and every
// epoch's figures (those of this run: a resumed run starts at its
// checkpoint).
type History struct {
	Steps  []trainer.StepInfo
	Epochs []trainer.EpochInfo
}

// PlotBytes is about the most a plot of a run of epochs × stepsPerEpoch
// steps takes on disk, to check for room before the run: measured, a PNG
// takes ~45 KiB whatever the steps, a PDF ~220 KiB (its fonts), an SVG
// 13 KiB and ~12 bytes a step.
func PlotBytes(epochs, stepsPerEpoch int) int64 {
	steps := min(int64(epochs), 1<<30) * min(int64(stepsPerEpoch), 1<<30)
	return 256<<10 + 32*min(steps, 1<<40)
}

// MetricsBytes is about the most the --metrics lines of a run of epochs
// take: a line is ~250 bytes.
func MetricsBytes(epochs int) int64 { return 512 * min(int64(epochs), 1<<40) }

// PlotFile draws h into path (plotfile.Formats: .png, .svg or .pdf) through
// outfile.Write: an existing file is refused (fs.ErrExist) unless replace,
// and replaced whole.
func PlotFile(path string, h History, replace bool) error {
	format, err := plotfile.Format(path)
	if err != nil {
		return err
	}
	var img bytes.Buffer
	if err := Plot(&img, format, h); err != nil {
		return err
	}
	return outfile.Write(path, img.Bytes(), fs.FileMode(0o644), replace)
}

// Plot draws the loss (per step, and per epoch) above the train and test
// accuracy (per epoch), both against the global step.
func Plot(w io.Writer, format string, h History) error {
	if len(h.Steps) == 0 && len(h.Epochs) == 0 {
		return fmt.Errorf("nothing to plot")
	}
	loss, acc := plot.New(), plot.New()
	loss.Title.Text, loss.Y.Label.Text = "training loss", "cross-entropy"
	acc.Title.Text, acc.Y.Label.Text, acc.X.Label.Text = "accuracy", "fraction correct", "step"
	steps := make(plotter.XYs, len(h.Steps))
	for i, s := range h.Steps {
		steps[i] = plotter.XY{X: float64(s.GlobalStep), Y: s.Loss}
	}
	var epochLoss, train, test plotter.XYs
	for _, e := range h.Epochs {
		x := float64(e.GlobalStep)
		epochLoss = append(epochLoss, plotter.XY{X: x, Y: e.Loss})
		train = append(train, plotter.XY{X: x, Y: e.TrainAcc})
		test = append(test, plotter.XY{X: x, Y: e.TestAcc})
	}
	if err := addLines(loss, "per step", steps, "epoch mean", epochLoss); err != nil {
		return err
	}
	if err := addLines(acc, "train", train, "test", test); err != nil {
		return err
	}
	acc.Y.Max, acc.Legend.Top = 1, false
	// One step axis for both: the accuracy starts only after an epoch.
	loss.X.Min, acc.X.Min = 0, 0
	loss.X.Max = max(loss.X.Max, acc.X.Max)
	acc.X.Max = loss.X.Max
	c, err := draw.NewFormattedCanvas(8*vg.Inch, 7*vg.Inch, format)
	if err != nil {
		return err
	}
	cs := plot.Align([][]*plot.Plot{{loss}, {acc}}, draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Millimeter * 4}, draw.New(c))
	loss.Draw(cs[0][0])
	acc.Draw(cs[1][0])
	_, err = c.WriteTo(w)
	return err
}

// addLines adds the named non-empty series to p, with a grid and a legend.
func addLines(p *plot.Plot, nameA string, a plotter.XYs, nameB string, b plotter.XYs) error {
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for i, s := range []struct {
		name string
		xys  plotter.XYs
	}{{nameA, a}, {nameB, b}} {
		if len(s.xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		l.Color, l.Width = plotutil.Color(i), vg.Points(1+float64(i))
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	return nil
}
