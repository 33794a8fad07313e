package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes {"checks": [...]}.
func WriteJSON(w io.Writer, rs []Result) error {
	if rs == nil {
		rs = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
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
		counts[r.Status]++
		label := strings.ToUpper(string(r.Status))
		pad := strings.Repeat(" ", 4-len(label))
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
