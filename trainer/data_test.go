package trainer

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDigits(t *testing.T) {
	d, err := Digits()
	if err != nil {
		t.Fatal(err)
	}
	got := []int{d.Rows(), d.Features, d.Classes}
	if diff := cmp.Diff([]int{1797, 64, 10}, got); diff != "" {
		t.Errorf("rows, features, classes (-want +got):\n%s", diff)
	}
	train, test, err := Split(d)
	if err != nil {
		t.Fatal(err)
	}
	if train.Rows() != 1438 || test.Rows() != 359 {
		t.Errorf("split %d/%d, want 1438/359", train.Rows(), test.Rows())
	}
	// Standardised: the train set's features have mean ~0.
	var sum float64
	for i := range train.Rows() {
		sum += float64(train.Row(i)[20])
	}
	if m := sum / float64(train.Rows()); m > 1e-4 || m < -1e-4 {
		t.Errorf("feature 20 mean %g after standardisation", m)
	}
}

func TestParseCSV(t *testing.T) {
	tests := []struct {
		name, in string
		want     *Dataset // nil: an error containing err
		err      string
	}{
		{"two rows", "1,2,0\n3.5,4,2\n", &Dataset{X: []float32{1, 2, 3.5, 4}, Y: []int32{0, 2}, Features: 2, Classes: 3}, ""},
		{"blank lines and CRLF", "\n1,0\r\n\n2,1\r\n", &Dataset{X: []float32{1, 2}, Y: []int32{0, 1}, Features: 1, Classes: 2}, ""},
		{"no final newline", "1,0", &Dataset{X: []float32{1}, Y: []int32{0}, Features: 1, Classes: 1}, ""},
		{"empty", "", nil, "data f.csv: no rows"},
		{"only blank", "\n\n", nil, "data f.csv: no rows"},
		{"header", "a,b,label\n1,2,0\n", nil, `data f.csv line 1: field 1: "a" is not a finite number (a header line?`},
		{"not a number", "1,2,0\n1,x,0\n", nil, `data f.csv line 2: field 2: "x" is not a finite number`},
		{"NaN", "1,NaN,0\n", nil, `line 1: field 2: "NaN" is not a finite number`},
		{"ragged", "1,2,0\n1,0\n", nil, "data f.csv line 2: 2 fields, want 3 like the rows before"},
		{"one field", "1\n", nil, "line 1: 1 field: want at least one feature"},
		{"negative label", "1,-1\n", nil, `line 1: label "-1": want an integer from 0`},
		{"fractional label", "1,0.5\n", nil, `line 1: label "0.5": want an integer`},
		{"huge label", "1,1000000000\n", nil, `label "1000000000"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCSV(strings.NewReader(tt.in), "f.csv", false)
			if tt.want == nil {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadDataFile(t *testing.T) {
	dir := t.TempDir()
	var gz bytes.Buffer
	z := gzip.NewWriter(&gz)
	z.Write([]byte("1,2,1\n3,4,0\n"))
	z.Close()
	os.WriteFile(filepath.Join(dir, "ok.csv.gz"), gz.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "notgz.csv.gz"), []byte("1,2,1\n"), 0o644)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := ReadDataFile(filepath.Join(dir, "ok.csv.gz"))
	if err != nil || d.Rows() != 2 || d.Classes != 2 {
		t.Fatalf("gzip file: %+v, %v", d, err)
	}
	for _, tc := range []struct{ path, err string }{
		{fifo, "not a regular file"},
		{"/dev/zero", "not a regular file"},
		{dir, "not a regular file"},
		{filepath.Join(dir, "missing.csv"), "no such file"},
		{filepath.Join(dir, "notgz.csv.gz"), "gzip"},
	} {
		_, err := ReadDataFile(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: error %v, want one naming the file and containing %q", tc.path, err, tc.err)
		}
	}
}

// A row longer than MaxRowBytes is refused as it is read, naming its line:
// one 600 MB row in a 2.6 MB gzip took 9.9 GB before a Go "out of memory".
// A row up to the limit is read.
func TestParseCSVRowLimit(t *testing.T) {
	wide := func(n int) string { return strings.Repeat("0,", n) + "1\n" } // n features
	var gz bytes.Buffer
	z := gzip.NewWriter(&gz)
	z.Write([]byte(wide(2)))
	for range 8 {
		z.Write([]byte(strings.Repeat("0,", 1<<20))) // one 16 MiB row
	}
	z.Write([]byte("1\n"))
	z.Close()
	_, err := ParseCSV(&gz, "wide.csv.gz", true)
	if want := "data wide.csv.gz line 2: longer than 4 MiB: a row may take at most that"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	n := MaxRowBytes/2 - 1 // 2 bytes a feature and the label: just within the limit
	d, err := ParseCSV(strings.NewReader(wide(n)), "f.csv", false)
	if err != nil || d.Rows() != 1 || d.Features != n {
		t.Errorf("a row of %d bytes: %v", 2*n+2, err)
	}
}
