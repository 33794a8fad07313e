package main

import (
	"bytes"
	"strings"
	"testing"
)

// train says back what it was given: a hyperparameter float32 cannot hold
// is refused as typed (--lr 1e-50 was "learning rate 0"), and a checkpoint
// with more epochs than --epochs says that nothing is trained and whose
// summary follows (it reported 6 epochs after --epochs 2 without a word;
// issue 30, item 15).
func TestTrainEchoesValues(t *testing.T) {
	t.Setenv("RANK", "")
	t.Setenv("WORLD_SIZE", "")
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Main(append([]string{"batchkit", "train"}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	for _, tt := range []struct{ flag, value, want string }{
		{"--lr", "1e-50", "batchkit: invalid --lr 1e-50: too small for the float32 the training computes in (smallest: 1e-45)\n"},
		{"--momentum", "1e-60", "batchkit: invalid --momentum 1e-60: too small for the float32 the training computes in (smallest: 1e-45)\n"},
		{"--weight-decay", "1e+39", "batchkit: invalid --weight-decay 1e+39: too large for the float32 the training computes in (largest: 3.4028235e+38)\n"},
	} {
		if code, _, stderr := run(tt.flag, tt.value); code != 2 || stderr != tt.want {
			t.Errorf("train %s %s: exit %d, stderr %q; want 2, %q", tt.flag, tt.value, code, stderr, tt.want)
		}
	}

	dir := t.TempDir()
	if code, _, stderr := run("--epochs", "2", "--checkpoint-dir", dir); code != 0 {
		t.Fatalf("train --epochs 2: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := run("--epochs", "1", "--checkpoint-dir", dir)
	if code != 0 {
		t.Fatalf("train --epochs 1 after 2: exit %d: %s", code, stderr)
	}
	if want := "at step 90: 2 epochs done, more than --epochs 1; nothing to train: the summary is the checkpoint's model, after its 2 epochs\n"; !strings.Contains(stdout, want) {
		t.Errorf("output %q does not say %q", stdout, want)
	}
	if !strings.Contains(stdout, "after 2 epochs, 90 steps") {
		t.Errorf("summary %q: want the checkpoint's 2 epochs, 90 steps", stdout)
	}
}
