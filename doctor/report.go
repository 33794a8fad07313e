package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/batchkit/batchkit/internal/printable"
)

// Every text doctor prints is one line, and may quote a tool: each is
// escaped by printable.Line (ESC as \x1b, a line break as \n, invalid
// UTF-8 as \xNN) and cut to maxField bytes, in text and in JSON alike (a
// script's JSON field may end up on a terminal too).

// maxField bounds each text of a result: room for the longest fix (the
// by-hand sourcing line), and small against what a tool can print.
const maxField = 2 << 10

// maxExcerpt bounds a tool's output quoted in a message: a version line,
// a ping's answer, an error's last line.
const maxExcerpt = 400

// escaped is r with each text through printable.Line. It is idempotent:
// Run's results pass again in the writers, for results from elsewhere.
func (r Result) escaped() Result {
	r.Name = printable.Line(r.Name, maxField)
	r.Status = Status(printable.Line(string(r.Status), maxField))
	r.Message = printable.Line(r.Message, maxField)
	r.Fix = printable.Line(r.Fix, maxField)
	return r
}

// WriteJSON writes {"checks": [...]} on one line, as every --format json
// (a script reads one value a line), the texts escaped as WriteText's.
func WriteJSON(w io.Writer, rs []Result) error {
	out := make([]Result, len(rs))
	for i, r := range rs {
		out[i] = r.escaped()
	}
	rs = out
	return json.NewEncoder(w).Encode(struct {
		Checks []Result `json:"checks"`
	}{rs})
}

var colors = map[Status]string{OK: "\x1b[32m", Warn: "\x1b[33m", Fail: "\x1b[31m", Skip: "\x1b[2m"}

// WriteText writes one line a check, its fix indented under it, and a
// count; color only for a terminal.
func WriteText(w io.Writer, rs []Result, color bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	counts := map[Status]int{}
	for _, r := range rs {
		r = r.escaped()
		counts[r.Status]++
		label := strings.ToUpper(string(r.Status))
		pad := strings.Repeat(" ", max(4-len(label), 0))
		if color {
			label = colors[r.Status] + label + "\x1b[0m"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\n", label, pad, r.Name, r.Message)
		if r.Fix != "" && r.Status != OK {
			fmt.Fprintf(tw, "\t\tfix: %s\n", r.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d checks: %d ok, %d warn, %d fail, %d skip\n",
		len(rs), counts[OK], counts[Warn], counts[Fail], counts[Skip])
	return err
}
