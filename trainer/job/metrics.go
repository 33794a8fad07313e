package job

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/batchkit/batchkit/internal/outfile"
	"github.com/batchkit/batchkit/trainer"
)

// train --metrics: where rank 0 writes its JSON lines, and what it may
// write over. The file is this run's own when it is empty or every line
// carries this run's "run" id (RunID): a run started again (a
// requeued job, resumed from its checkpoint or not) continues it. Anything
// else that exists (a CSV, another run's metrics) is refused before the
// ranks connect, unless --force, which replaces it. stdout and stderr
// themselves ("-", /dev/stdout, the file stdout was redirected to) are
// written to as streams, never truncated nor reopened; other files that are
// not regular (a FIFO, a device, a directory) are refused (outfile).

// metricsFile is rank 0's --metrics, decided before the ranks connect (Check).
type metricsFile struct {
	path   string
	run    string    // every line's "run": RunID
	stream io.Writer // stdout or stderr, when path is one of them
	force  bool
}

// RunID is the run's id in its --metrics lines ("run"): it names a run by
// what a checkpoint must match to be resumed
// (trainer's compatible): model sizes, train rows, features, world size,
// batch size, seed. Learning rate, momentum, weight decay and epochs may
// change on resume, so they are not part of it. 16 hex digits of SHA-256.
func RunID(sizes []int, train *trainer.Dataset, world, batch int, seed uint64) string {
	h := sha256.Sum256(fmt.Appendf(nil, "batchkit train metrics\nmodel %v\ntrain rows %d features %d\nworld %d\nbatch %d\nseed %d\n",
		sizes, train.Rows(), train.Features, world, batch, seed))
	return hex.EncodeToString(h[:8])
}

// metricsPrefix is how every line of run begins (epochLine's first field).
func metricsPrefix(run string) string { return `{"run":"` + run + `",` }

// metricsStream is the stream path names: stdout for "-", else stdout or
// stderr when path is the same file as one of them (/dev/stdout, a link to
// it, the file stdout was redirected to). nil otherwise. Opening such a
// path again would truncate what the process has written there already, or
// write over it from offset 0; writing to the stream interleaves properly.
func metricsStream(path string, stdout, stderr io.Writer) io.Writer {
	if path == "-" {
		return stdout
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	for _, w := range []io.Writer{stdout, stderr} {
		if f, ok := w.(*os.File); ok {
			if si, err := f.Stat(); err == nil && os.SameFile(fi, si) {
				return w
			}
		}
	}
	return nil
}

// checkMetrics decides rank 0's --metrics before the ranks connect, so that
// a refusal is one line and exit 2 there, with the file untouched, instead
// of rank 0 failing after the rendezvous and the others reporting a lost
// connection. With force, a file that is not this run's metrics is replaced
// (by an empty one) here; never the --data file (data), which is read by
// then but surely not meant to go.
func checkMetrics(path, run, data string, force bool, stdout, stderr io.Writer) (*metricsFile, error) {
	d := &metricsFile{path: path, run: run, force: force}
	if d.stream = metricsStream(path, stdout, stderr); d.stream != nil {
		return d, nil
	}
	var nre *outfile.NotRegularError
	if err := outfile.Check(path); errors.As(err, &nre) {
		return nil, invalid("invalid --metrics %q: is %s, not a regular file", path, nre.Kind)
	}
	_, whose, err := readMetrics(path, run)
	if err != nil {
		return nil, invalid("invalid --metrics: %v", err)
	}
	if whose != metricsOurs {
		if fi, err := os.Stat(path); err == nil && data != "" {
			if di, err := os.Stat(data); err == nil && os.SameFile(fi, di) {
				return nil, invalid("invalid --metrics %q: it is the --data file %s", path, data)
			}
		}
		if !force {
			return nil, metricsRefusal(path, whose)
		}
		if err := outfile.Write(path, nil, 0o644, true); err != nil {
			return nil, invalid("invalid --metrics: %v", err)
		}
	}
	// Opened once here (created if missing): a directory that is not there
	// or not writable fails now, not after the ranks connected.
	f, err := outfile.Append(path, 0o644)
	if err != nil {
		return nil, invalid("invalid --metrics: %v", err)
	}
	f.Close()
	return d, nil
}

// metricsRefusal is the one line for a file that is not this run's.
func metricsRefusal(path string, whose metricsOwner) error {
	if whose == metricsOtherRun {
		return invalid("invalid --metrics %q: holds another run's metrics (another model, data, world size, batch size or seed; use --force to replace it)", path)
	}
	return invalid("invalid --metrics %q: file exists and is not this run's metrics (use --force to replace it)", path)
}

// metricsOwner is whose lines a file holds.
type metricsOwner int

const (
	metricsOurs     metricsOwner = iota // missing, empty, or this run's lines only
	metricsOtherRun                     // metrics lines of another run id
	metricsNotOurs                      // anything else
)

// readMetrics reads the metrics file at path and says whose it is. A
// missing file is ours, with no content. Only a file that begins as this
// run's lines do is read whole: a large data file is judged by its first
// bytes. The open does not block (a FIFO swapped in is refused).
func readMetrics(path, run string) ([]byte, metricsOwner, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, metricsOurs, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, 0, err
	} else if kind := outfile.KindOf(fi.Mode()); kind != "" {
		return nil, 0, &outfile.NotRegularError{Path: path, Kind: kind}
	}
	prefix := metricsPrefix(run)
	head := make([]byte, len(prefix))
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, 0, err
	}
	head = head[:n]
	if !bytes.HasPrefix([]byte(prefix), head) {
		return nil, whoseMetrics(head, run), nil
	}
	rest, err := io.ReadAll(f)
	if err != nil {
		return nil, 0, err
	}
	b := append(head, rest...)
	return b, whoseMetrics(b, run), nil
}

// whoseMetrics judges b, a metrics file or its first bytes: ours when every
// line is a metrics line of run; a last line without its newline (a kill
// cut it short) counts when it begins as run's lines do.
func whoseMetrics(b []byte, run string) metricsOwner {
	prefix := []byte(metricsPrefix(run))
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if !bytes.HasSuffix(line, []byte("\n")) {
			if bytes.HasPrefix(line, prefix) || bytes.HasPrefix(prefix, line) {
				continue
			}
		} else if l, ok := parseMetricsLine(line); ok && l.Run == run {
			continue
		}
		if bytes.HasPrefix(line, []byte(`{"run":"`)) {
			return metricsOtherRun
		}
		return metricsNotOurs
	}
	return metricsOurs
}

// metricsKey is what identifies a metrics line.
type metricsKey struct {
	Run   string
	Epoch int
}

// parseMetricsLine reads a line's run and epoch; ok when it is a JSON
// object with both.
func parseMetricsLine(line []byte) (metricsKey, bool) {
	var l struct {
		Run   *string `json:"run"`
		Epoch *int    `json:"epoch"`
	}
	if json.Unmarshal(line, &l) != nil || l.Run == nil || l.Epoch == nil {
		return metricsKey{}, false
	}
	return metricsKey{*l.Run, *l.Epoch}, true
}

// open opens the metrics for a run that starts after epochs epochs (0 for a
// fresh run, the checkpoint's for a resumed one). A file keeps the lines of
// those epochs and loses the rest, which this run writes again (a killed
// run may have got further than its checkpoint), rewritten whole through
// outfile.Write when anything goes; then it is appended to. A stream is
// written to as it is. close is nil for a stream.
func (d *metricsFile) open(epochs int) (w io.Writer, close func() error, err error) {
	if d.stream != nil {
		return d.stream, nil, nil
	}
	b, whose, err := readMetrics(d.path, d.run)
	if err != nil {
		return nil, nil, err
	}
	if whose != metricsOurs && !d.force {
		return nil, nil, metricsRefusal(d.path, whose) // changed since checkMetrics
	}
	if keep := metricsUpTo(b, d.run, epochs); !bytes.Equal(keep, b) {
		if err := outfile.Write(d.path, keep, 0o644, true); err != nil {
			return nil, nil, err
		}
	}
	f, err := outfile.Append(d.path, 0o644)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

// metricsUpTo is the lines of b of run and epochs 1 to epochs (a resumed
// run's checkpoint has those done; it runs the rest again). Lines of another
// run, other text and a line a kill cut short are dropped.
func metricsUpTo(b []byte, run string, epochs int) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if l, ok := parseMetricsLine(line); ok && l.Run == run && l.Epoch <= epochs && bytes.HasSuffix(line, []byte("\n")) {
			out = append(out, line...)
		}
	}
	return out
}
