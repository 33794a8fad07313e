package local

import (
	"bytes"
	"io"
	"strconv"
	"sync"
)

// maxLine bounds the partial line kept per stream. A longer line is cut into
// pieces of this size, each printed as a whole line of its own, so one rank
// that never prints a newline cannot exhaust memory or hold the others up.
const maxLine = 64 << 10

// palette colours rank prefixes on a terminal, in turn. No red: that reads
// as an error.
var palette = []string{"36", "33", "32", "35", "34", "96", "93", "92", "95", "94"}

// Prefix is what starts each output line of rank: "[3] ", coloured if asked.
func Prefix(rank int, color bool) string {
	p := "[" + strconv.Itoa(rank) + "]"
	if color {
		p = "\x1b[" + palette[rank%len(palette)] + "m" + p + "\x1b[0m"
	}
	return p + " "
}

// lineWriter splits one stream into lines and writes each whole line, with
// its prefix, to dst in a single Write under mu, which all lineWriters that
// share a destination share. Lines therefore never interleave, however many
// writers run concurrently. tee, if set, receives the same lines unprefixed,
// under the same lock.
//
// Write errors of dst and tee are recorded, not returned: the stream must be
// drained whatever happens to our output, or the rank would block on a full
// pipe.
type lineWriter struct {
	mu     *sync.Mutex
	dst    io.Writer
	prefix []byte
	tee    io.Writer

	buf      []byte // the current partial line
	out, raw []byte // scratch for one emit
	teeErr   error  // the first write error of tee
}

func newLineWriter(mu *sync.Mutex, dst io.Writer, prefix string, tee io.Writer) *lineWriter {
	return &lineWriter{mu: mu, dst: dst, prefix: []byte(prefix), tee: tee}
}

// Write buffers p and writes every line it completes.
func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	rest := w.buf
	w.out, w.raw = w.out[:0], w.raw[:0]
	for {
		i := bytes.IndexByte(rest, '\n')
		switch {
		case i >= 0 && i <= maxLine:
			w.add(rest[:i+1], false)
			rest = rest[i+1:]
			continue
		case len(rest) > maxLine:
			w.add(rest[:maxLine], true)
			rest = rest[maxLine:]
			continue
		}
		break
	}
	w.emit()
	w.buf = append(w.buf[:0], rest...)
	return len(p), nil
}

// Flush writes a final partial line, completed with a newline.
func (w *lineWriter) Flush() {
	w.out, w.raw = w.out[:0], w.raw[:0]
	if len(w.buf) > 0 {
		w.add(w.buf, true)
		w.buf = w.buf[:0]
	}
	w.emit()
}

func (w *lineWriter) add(line []byte, newline bool) {
	w.out = append(w.out, w.prefix...)
	w.out = append(w.out, line...)
	w.raw = append(w.raw, line...)
	if newline {
		w.out = append(w.out, '\n')
		w.raw = append(w.raw, '\n')
	}
}

func (w *lineWriter) emit() {
	if len(w.out) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dst != nil {
		w.dst.Write(w.out) //nolint:errcheck // see the type's comment
	}
	if w.tee != nil {
		if _, err := w.tee.Write(w.raw); err != nil && w.teeErr == nil {
			w.teeErr = err
		}
	}
}
