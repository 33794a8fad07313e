package bench

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/plot"
)

// decodePNG checks a plot without comparing pixels: a PNG of the documented
// size that is not one flat colour.
func decodePNG(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got != (image.Point{768, 480}) {
		t.Errorf("plot is %v pixels, want 768×480", got)
	}
	colours := map[[4]uint32]bool{}
	for y := 0; y < img.Bounds().Dy(); y += 7 {
		for x := 0; x < img.Bounds().Dx(); x += 7 {
			r, g, b, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, b, a}] = true
		}
	}
	if len(colours) < 3 {
		t.Errorf("plot has %d colours: blank?", len(colours))
	}
	return img
}

func TestPlotFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "busbw.png")
	results := append(append(readFile(t, "tcp.jsonl"), readFile(t, "gloo.jsonl")...), readFile(t, "mpi.jsonl")...)
	// An existing file is kept unless replace is asked for.
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := PlotFile(path, results, false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("plot over an existing file without replace: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("existing file changed to %.20q", b)
	}
	if err := PlotFile(path, results, true); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decodePNG(t, b)
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("replaced plot mode %v, want the old file's 0600", fi.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
	// A new file, the same image.
	fresh := filepath.Join(dir, "fresh.png")
	if err := PlotFile(fresh, results, false); err != nil {
		t.Fatal(err)
	}
	if b2, _ := os.ReadFile(fresh); !bytes.Equal(b, b2) {
		t.Error("a new plot differs from the replaced one")
	}
	// Failing to replace names the file asked for, not the temporary one.
	if err := PlotFile(filepath.Join(dir, "no/such/dir/p.png"), results, true); err == nil || !strings.Contains(err.Error(), "no/such/dir/p.png:") {
		t.Errorf("replace into a missing directory: %v", err)
	}

	// One series of one size: the log axis must not reach 0.
	one := filepath.Join(dir, "one.png")
	if err := PlotFile(one, results[:1], false); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(one)
	decodePNG(t, b)

	// SVG and PDF by extension; anything else refused before any work.
	var svg bytes.Buffer
	if err := Plot(&svg, "svg", results); err != nil || !strings.Contains(svg.String(), "<svg") {
		t.Errorf("svg plot: %v", err)
	}
	for _, bad := range []string{"busbw.gif", "busbw"} {
		err := PlotFile(filepath.Join(dir, bad), results, false)
		if err == nil || !strings.Contains(err.Error(), "want a file name ending in .png, .svg, .pdf") {
			t.Errorf("PlotFile(%s) = %v", bad, err)
		}
	}
	if err := PlotFile(filepath.Join(dir, "no/such/dir/p.png"), results, false); err == nil {
		t.Error("plot into a missing directory: no error")
	}
	if err := PlotFile(filepath.Join(dir, "e.png"), nil, false); err == nil {
		t.Error("plot of nothing: no error")
	}
}

func TestPlotLegendAndTitle(t *testing.T) {
	ss, _ := group(append(readFile(t, "tcp.jsonl"), readFile(t, "mpi.jsonl")...))
	title, v := commonParts(ss)
	var names []string
	for _, s := range ss {
		names = append(names, legendName(s.key, v))
	}
	if title != "allreduce float32" {
		t.Errorf("title %q", title)
	}
	if diff := cmp.Diff([]string{"tcp 2 ranks", "mpi (openmpi) 4 ranks", "c-openmpi 4 ranks"}, names); diff != "" {
		t.Errorf("legend (-want +got):\n%s", diff)
	}
}

func TestSizeTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var out []string
		for _, tk := range (sizeTicks{}).Ticks(lo, hi) {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{8, 64 << 20, []string{"16 B", "64 B", "256 B", "1 KiB", "4 KiB", "16 KiB", "64 KiB", "256 KiB", "1 MiB", "4 MiB", "16 MiB", "64 MiB"}},
		{8, 1024, []string{"8 B", "16 B", "32 B", "64 B", "128 B", "256 B", "512 B", "1 KiB"}},
		{1, 1 << 40, []string{"1 B", "32 B", "1 KiB", "32 KiB", "1 MiB", "32 MiB", "1 GiB", "32 GiB", "1 TiB"}},
		{12, 15, []string{"12 B", "15 B"}}, // no power of two in range
	} {
		if diff := cmp.Diff(tc.want, labels(tc.lo, tc.hi)); diff != "" {
			t.Errorf("ticks %v..%v (-want +got):\n%s", tc.lo, tc.hi, diff)
		}
	}
	var _ plot.Ticker = sizeTicks{}
}
