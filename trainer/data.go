package trainer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/batchkit/batchkit/internal/bytesize"
	"github.com/batchkit/batchkit/internal/outfile"
)

// digitsGz is the UCI optical digits test set as scikit-learn ships it
// (trainer/data/digits.README.rst): 1797 rows of 64 pixels 0..16, then the
// label 0..9; no header.
//
//go:embed data/digits.csv.gz
var digitsGz []byte

// MaxDataBytes caps a --data file, compressed or not: a larger one is
// refused rather than exhausting memory.
const MaxDataBytes = 1 << 30

// MaxRowBytes caps a row of a data file: a 100,000-feature row of full
// float32 precision takes ~1.2 MB. A row is read whole before it is
// parsed, so without a cap one endless line (600 MB in a 2.6 MB gzip) took
// its length several times over in memory.
const MaxRowBytes = 4 << 20

// MaxClasses caps the label value: a stray 1e9 would otherwise size an output
// layer of a billion units.
const MaxClasses = 1 << 16

// Dataset is a table of samples: X holds Rows×Features values row-major, Y
// the labels in [0, Classes).
type Dataset struct {
	X        []float32
	Y        []int32
	Features int
	Classes  int
}

// Rows is the number of samples.
func (d *Dataset) Rows() int { return len(d.Y) }

// Row is sample i's features.
func (d *Dataset) Row(i int) []float32 { return d.X[i*d.Features : (i+1)*d.Features] }

// DataError says which file and line of a data set is wrong.
type DataError struct {
	File string
	Line int // 0: the file as a whole
	Err  error
}

func (e *DataError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("data %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("data %s line %d: %v", e.File, e.Line, e.Err)
}
func (e *DataError) Unwrap() error { return e.Err }

// Digits is the embedded digits data set.
func Digits() (*Dataset, error) {
	return ParseCSV(bytes.NewReader(digitsGz), "digits.csv.gz", true)
}

// ReadDataFile reads a CSV data set from path (gzip when it ends in .gz).
// Only a regular file of at most MaxDataBytes is read: a FIFO, a device or a
// directory is refused before any read could block or never end.
func ReadDataFile(path string) (*Dataset, error) {
	// O_NONBLOCK: opening a FIFO with no writer would otherwise block here.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, &DataError{File: path, Err: unwrapPath(err)}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &DataError{File: path, Err: unwrapPath(err)}
	}
	if !st.Mode().IsRegular() {
		return nil, &DataError{File: path, Err: fmt.Errorf("is %s, not a regular file", outfile.KindOf(st.Mode()))}
	}
	if st.Size() > MaxDataBytes {
		return nil, &DataError{File: path, Err: fmt.Errorf("%d bytes: larger than the %d-byte limit", st.Size(), MaxDataBytes)}
	}
	return ParseCSV(f, path, strings.HasSuffix(path, ".gz"))
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ParseCSV reads rows of numbers separated by commas, the label last: an
// integer in [0, MaxClasses). Every row has the same length (at least 2);
// blank lines are skipped; there is no header. name is the file's name in
// errors. gz: the stream is gzip-compressed (and capped at MaxDataBytes
// once decompressed).
func ParseCSV(r io.Reader, name string, gz bool) (*Dataset, error) {
	if gz {
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, &DataError{File: name, Err: fmt.Errorf("gzip: %w", err)}
		}
		defer z.Close()
		r = z
	}
	sc := bufio.NewScanner(&limitedReader{r: r, left: MaxDataBytes})
	sc.Buffer(make([]byte, 0, 1<<16), MaxRowBytes+2) // the row, \r\n
	d := &Dataset{}
	line := 0
	for sc.Scan() {
		line++
		if s := strings.TrimSpace(sc.Text()); s != "" {
			if perr := d.addRow(s); perr != nil {
				return nil, &DataError{File: name, Line: line, Err: perr}
			}
		}
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		return nil, &DataError{File: name, Line: line + 1, Err: fmt.Errorf("longer than %s: a row may take at most that", bytesize.Format(MaxRowBytes))}
	case err != nil:
		return nil, &DataError{File: name, Line: line + 1, Err: err}
	}
	if d.Rows() == 0 {
		return nil, &DataError{File: name, Err: errors.New("no rows")}
	}
	return d, nil
}

// addRow appends one line's features and label, field by field: no slice
// of the row's fields is made.
func (d *Dataset) addRow(s string) error {
	fields := strings.Count(s, ",") + 1
	if fields < 2 {
		return fmt.Errorf("%d field: want at least one feature and the label", fields)
	}
	if d.Features == 0 && d.Rows() == 0 {
		d.Features = fields - 1
	} else if fields-1 != d.Features {
		return fmt.Errorf("%d fields, want %d like the rows before", fields, d.Features+1)
	}
	rest := s
	for i := range fields - 1 {
		f, after, _ := strings.Cut(rest, ",")
		rest = after
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 32)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			hint := ""
			if d.Rows() == 0 {
				hint = " (a header line? the file must hold numbers only)"
			}
			return fmt.Errorf("field %d: %q is not a finite number%s", i+1, f, hint)
		}
		d.X = append(d.X, float32(v))
	}
	lab := strings.TrimSpace(rest)
	y, err := strconv.Atoi(lab)
	if err != nil || y < 0 || y >= MaxClasses {
		return fmt.Errorf("label %q: want an integer from 0 to %d", lab, MaxClasses-1)
	}
	d.Y = append(d.Y, int32(y))
	d.Classes = max(d.Classes, y+1)
	return nil
}

// limitedReader fails, rather than ends, after left bytes.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, fmt.Errorf("larger than the %d-byte limit once decompressed", int64(MaxDataBytes))
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// TestEvery fixes the split: row i (from 0) is a test row when i%TestEvery
// == TestEvery-1, so every 5th row, 20 %, whatever the seed.
const TestEvery = 5

// Split divides d into the train and test sets (TestEvery) and standardises
// both with the train set's per-feature mean and standard deviation (a
// feature constant on the train set is only centred). Scaling with train
// statistics only keeps the test set unseen; it also suits any --data file,
// where a fixed divisor like the digits' 16 would not.
func Split(d *Dataset) (train, test *Dataset, err error) {
	if d.Rows() < TestEvery {
		return nil, nil, fmt.Errorf("%d rows: want at least %d (every %dth row is a test row)", d.Rows(), TestEvery, TestEvery)
	}
	// Sized exactly: appending would grow each set to up to twice its size.
	nTest := d.Rows() / TestEvery
	nTrain := d.Rows() - nTest
	train = &Dataset{Features: d.Features, Classes: d.Classes,
		X: make([]float32, 0, nTrain*d.Features), Y: make([]int32, 0, nTrain)}
	test = &Dataset{Features: d.Features, Classes: d.Classes,
		X: make([]float32, 0, nTest*d.Features), Y: make([]int32, 0, nTest)}
	for i := range d.Rows() {
		dst := train
		if i%TestEvery == TestEvery-1 {
			dst = test
		}
		dst.X = append(dst.X, d.Row(i)...)
		dst.Y = append(dst.Y, d.Y[i])
	}
	mean, scale := standardisation(train)
	for _, s := range []*Dataset{train, test} {
		for i := range s.X {
			f := i % s.Features
			s.X[i] = (s.X[i] - mean[f]) * scale[f]
		}
	}
	return train, test, nil
}

// standardisation is the per-feature mean and 1/std (1 where std is 0),
// summed in float64 for accuracy.
func standardisation(d *Dataset) (mean, scale []float32) {
	n := float64(d.Rows())
	sum, sq := make([]float64, d.Features), make([]float64, d.Features)
	for i, v := range d.X {
		sum[i%d.Features] += float64(v)
	}
	mean, scale = make([]float32, d.Features), make([]float32, d.Features)
	for f := range mean {
		mean[f] = float32(sum[f] / n)
	}
	for i, v := range d.X {
		dv := float64(v) - float64(mean[i%d.Features])
		sq[i%d.Features] += dv * dv
	}
	for f := range scale {
		scale[f] = 1
		if sd := math.Sqrt(sq[f] / n); sd > 0 {
			scale[f] = float32(1 / sd)
		}
	}
	return mean, scale
}
