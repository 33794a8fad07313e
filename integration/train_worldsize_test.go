package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchkit/batchkit/internal/mdtable"
)

// worldSizeTable is the line above the table of docs/reference/train.md
// ("Data parallel") that this test measures again.
const worldSizeTable = "Measured with `batchkit run -n N -- batchkit train --batch-size B --format json` (the digits, 20 epochs, seed 1; integration/train_worldsize_test.go runs every row again):"

// TestDataParallelAsDocumented runs every row of the table of world sizes in
// docs/reference/train.md and checks what it says (issue 30 item 20:
// --batch-size is per rank, -n 4 is a 4 times larger global batch and 4
// times fewer steps, weights differ across world sizes, the same seed
// gives the same weights at one world size, batch size and backend): the
// global batch and the steps exactly; the accuracy, the loss and the
// weights' hash as measured on amd64 (where Go and gonum's kernels round
// alike on every CPU); every row's weights differ from the others'; and
// a row run twice ends with the same weights. The README's numbers are the
// table's.
func TestDataParallelAsDocumented(t *testing.T) {
	cpu.enter(t)
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	doc, err := os.ReadFile("../docs/reference/train.md")
	if err != nil {
		t.Fatal(err)
	}
	table, err := mdtable.Under(string(doc), worldSizeTable, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(table) < 3 {
		t.Fatalf("the table has %d rows, want world sizes 1, 2 and 4 at least", len(table))
	}
	seen := map[string]string{} // weights -> row
	steps := map[int]int{}      // ranks -> steps at --batch-size 32
	for i, row := range table {
		n, b, global, wantSteps := cellInt(t, row[0]), cellInt(t, row[1]), cellInt(t, row[2]), cellInt(t, row[3])
		if global != n*b {
			t.Errorf("row %d: global batch %d, want ranks × --batch-size = %d", i+1, global, n*b)
		}
		s := trainRun(t, n, b)
		name := fmt.Sprintf("-n %d --batch-size %d", n, b)
		if s.Steps != wantSteps || s.WorldSize != n {
			t.Errorf("%s: %d steps on %d ranks, the doc says %d", name, s.Steps, s.WorldSize, wantSteps)
		}
		if s.TestAccuracy < 0.95 {
			t.Errorf("%s: test accuracy %.4f, want at least 0.95", name, s.TestAccuracy)
		}
		if runtime.GOARCH == "amd64" {
			hash := strings.Trim(row[6], "`…")
			if !near(s.TestAccuracy, row[4]) || !near(s.TestLoss, row[5]) || !strings.HasPrefix(s.WeightsSHA256, hash) {
				t.Errorf("%s: test accuracy %.4f, test loss %.4f, weights %s; the doc says %s, %s, %s…",
					name, s.TestAccuracy, s.TestLoss, s.WeightsSHA256, row[4], row[5], hash)
			}
		}
		if other, ok := seen[s.WeightsSHA256]; ok {
			t.Errorf("%s ended with the weights of %s: another world size or batch gives other weights", name, other)
		}
		seen[s.WeightsSHA256] = name
		if b == 32 {
			steps[n] = s.Steps
		}
		if i == 1 { // same seed, world size, batch and backend: same weights
			if again := trainRun(t, n, b); again.WeightsSHA256 != s.WeightsSHA256 {
				t.Errorf("%s twice: weights %s, then %s", name, s.WeightsSHA256, again.WeightsSHA256)
			}
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	says := fmt.Sprintf("%d steps on 1 rank, %d on 2, %d on 4", steps[1], steps[2], steps[4])
	if !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), says) {
		t.Errorf("README.md does not say %q, what the table measures", says)
	}
}

// dataParallelSummary is the part of train's JSON summary the test reads.
type dataParallelSummary struct {
	TestAccuracy  float64 `json:"test_accuracy"`
	TestLoss      float64 `json:"test_loss"`
	Steps         int     `json:"steps"`
	WorldSize     int     `json:"world_size"`
	WeightsSHA256 string  `json:"weights_sha256"`
}

// trainRun is `batchkit run -n N -- batchkit train --batch-size B --format
// json` with the defaults otherwise, and rank 0's summary.
func trainRun(t *testing.T, n, batch int) dataParallelSummary {
	t.Helper()
	out := run(t, 3*time.Minute, bin, "run", "-n", strconv.Itoa(n), "--", bin, "train", "--batch-size", strconv.Itoa(batch), "--format", "json")
	for _, l := range strings.Split(out, "\n") {
		if js, ok := strings.CutPrefix(l, "[0] {"); ok {
			var s dataParallelSummary
			if err := json.Unmarshal([]byte("{"+js), &s); err != nil {
				t.Fatalf("%v: %s", err, l)
			}
			return s
		}
	}
	t.Fatalf("no summary from rank 0 in:\n%s", out)
	return dataParallelSummary{}
}

// near reports whether got rounds to the doc's 4-decimal value.
func near(got float64, doc string) bool {
	want, err := strconv.ParseFloat(doc, 64)
	return err == nil && math.Abs(got-want) <= 0.00005+1e-9
}

func cellInt(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("the table's cell %q is not a number", s)
	}
	return n
}
