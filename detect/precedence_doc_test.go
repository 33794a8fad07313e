package detect

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/batchkit/batchkit/internal/mdtable"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// documented is one row of docs/reference/precedence.md's "Which launcher
// wins" table, or the same facts taken from a layer.
type documented struct {
	Launcher                         string
	Identify                         [][]string
	Rank, Size, LocalRank, LocalSize vars
	NodeRank, NumNodes               vars
}

// TestPrecedenceTable checks that docs/reference/precedence.md's table says
// what the code's table does: the same layers in the same order, identified by the
// same variables, and each count read from the same ones.
func TestPrecedenceTable(t *testing.T) {
	b, err := os.ReadFile("../docs/reference/precedence.md")
	if err != nil {
		t.Fatal(err)
	}
	got, err := precedenceTable(string(b))
	if err != nil {
		t.Fatal(err)
	}
	var want []documented
	for _, l := range layers {
		d := documented{Launcher: string(l.launcher), Identify: l.identify, Rank: l.rank, Size: l.size,
			LocalRank: l.localRank, LocalSize: l.localSize, NodeRank: l.nodeRank, NumNodes: l.numNodes}
		if d.LocalSize == nil {
			for _, name := range l.tasksPerNode { // the local size is its node's entry
				d.LocalSize = append(d.LocalSize, []string{name})
			}
		}
		want = append(want, d)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("precedence.md's table (+) differs from detect's layers (-):\n%s", diff)
	}
}

var (
	backticked = regexp.MustCompile("`([^`]*)`")
	varName    = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*$`)
)

// precedenceTable parses the table under "## Which launcher wins". Columns: #,
// layer (the launcher in backticks last), detected by, rank, world size,
// local rank, local size, node rank, nodes.
func precedenceTable(doc string) ([]documented, error) {
	table, err := mdtable.Under(doc, "## Which launcher wins", 9)
	if err != nil {
		return nil, fmt.Errorf("docs/reference/precedence.md: %w", err)
	}
	var rows []documented
	for _, c := range table {
		layer := backticked.FindAllStringSubmatch(c[1], -1)
		d := documented{Identify: groups(c[2], " and "), Rank: groups(c[3], ", else "), Size: groups(c[4], ", else "),
			LocalRank: groups(c[5], ", else "), LocalSize: groups(c[6], ", else "), NodeRank: groups(c[7], ", else "),
			NumNodes: groups(c[8], ", else ")}
		if len(layer) > 0 {
			d.Launcher = layer[len(layer)-1][1]
		}
		rows = append(rows, d)
	}
	return rows, nil
}

// groups splits a cell at sep and lists the variable names (in backticks)
// of each part, leaving out parts without any.
func groups(cell, sep string) [][]string {
	var out [][]string
	for _, part := range strings.Split(cell, sep) {
		var names []string
		for _, m := range backticked.FindAllStringSubmatch(part, -1) {
			if varName.MatchString(m[1]) {
				names = append(names, m[1])
			}
		}
		if names != nil {
			out = append(out, names)
		}
	}
	return out
}
