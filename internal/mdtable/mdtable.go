// Package mdtable reads a Markdown table from under a heading, for the
// tests that keep a README's tables and the code's tables in step.
package mdtable

import (
	"fmt"
	"strings"
)

// Under returns the body rows of the first table after the line heading
// (for example "### Exit status"), each row's cells trimmed; the header row
// and the rule under it are left out. Every row must have columns cells.
// A cell may not hold a "|", escaped or not.
func Under(markdown, heading string, columns int) ([][]string, error) {
	_, section, ok := strings.Cut(markdown, "\n"+heading+"\n")
	if !ok {
		return nil, fmt.Errorf("no %q heading", heading)
	}
	var rows [][]string
	seen := 0 // table lines so far: the first is the header, the second its rule
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			if seen > 0 {
				break // the end of the table
			}
			continue
		}
		seen++
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != columns {
			return nil, fmt.Errorf("under %q: %d columns, want %d: %s", heading, len(cells), columns, line)
		}
		if seen <= 2 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no table rows under %q", heading)
	}
	return rows, nil
}
