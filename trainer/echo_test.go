package trainer

import (
	"math"
	"testing"
)

// A hyperparameter whose float32 is not what was given is refused, said
// as given; values that survive pass (issue 30, item 15: --lr 1e-50 was
// "learning rate 0").
func TestFloat32(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    float64
		want float32
		err  string
	}{
		{"plain", 0.05, 0.05, ""},
		{"zero stays zero", 0, 0, ""},
		{"a float32 denormal is a float32", 1e-44, float32(1e-44), ""},
		{"underflow", 1e-50, 0, "too small for the float32 the training computes in (smallest: 1e-45)"},
		{"negative underflow", -1e-50, 0, "too small for the float32 the training computes in (smallest: 1e-45)"},
		{"overflow", 1e39, 0, "too large for the float32 the training computes in (largest: 3.4028235e+38)"},
		{"infinity is left to Validate", math.Inf(1), float32(math.Inf(1)), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Float32(tt.v)
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if got != tt.want || msg != tt.err {
				t.Errorf("Float32(%v) = %v, %q; want %v, %q", tt.v, got, msg, tt.want, tt.err)
			}
		})
	}
}

// A resumed run says where it goes on, or that the checkpoint already has
// the epochs asked for and what the summary then is (issue 30, item 15:
// --epochs 2 after a 6-epoch run reported 6 epochs without a word why).
func TestResumeLine(t *testing.T) {
	st := func(step, epoch int) Start {
		return Start{ResumedFrom: step, ResumedFile: "ck/ckpt-0000000270.bkpt", ResumedAtEpoch: epoch}
	}
	for _, tt := range []struct {
		name   string
		st     Start
		epochs int
		want   string
	}{
		{"mid-way", st(100, 2), 6, "resumed from ck/ckpt-0000000270.bkpt at step 100 (epoch 3 of 6)"},
		{"all done", st(270, 6), 6, "resumed from ck/ckpt-0000000270.bkpt at step 270: all 6 epochs done; nothing to train: the summary is the checkpoint's model, after its 6 epochs"},
		{"fewer asked", st(270, 6), 2, "resumed from ck/ckpt-0000000270.bkpt at step 270: 6 epochs done, more than --epochs 2; nothing to train: the summary is the checkpoint's model, after its 6 epochs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResumeLine(tt.st, tt.epochs); got != tt.want {
				t.Errorf("ResumeLine = %q\nwant          %q", got, tt.want)
			}
		})
	}
}
