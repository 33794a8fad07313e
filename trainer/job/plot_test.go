package job

import (
	"bytes"
	"errors"
	"github.com/batchkit/batchkit/trainer"
	"io/fs"
	"path/filepath"
	"testing"
)

func TestPlotFile(t *testing.T) {
	h := History{
		Steps:  []trainer.StepInfo{{GlobalStep: 1, Loss: 2.3}, {GlobalStep: 2, Loss: 1.9}},
		Epochs: []trainer.EpochInfo{{Epoch: 1, GlobalStep: 2, Loss: 2.1, TrainAcc: 0.5, TestAcc: 0.6}},
	}
	path := filepath.Join(t.TempDir(), "train.png")
	if err := PlotFile(path, h, false); err != nil {
		t.Fatal(err)
	}
	if err := PlotFile(path, h, false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second write without replace: %v, want fs.ErrExist", err)
	}
	if err := PlotFile(path, h, true); err != nil {
		t.Errorf("replace: %v", err)
	}
	var svg bytes.Buffer
	if err := Plot(&svg, "svg", h); err != nil || !bytes.Contains(svg.Bytes(), []byte("<svg")) {
		t.Errorf("svg: %v", err)
	}
	if err := Plot(&svg, "png", History{}); err == nil {
		t.Error("an empty history plotted")
	}
}
