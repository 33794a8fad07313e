package mdtable

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnder(t *testing.T) {
	doc := "# T\n\n### Other\n\n| a | b |\n|---|---|\n| x | y |\n\n### Codes\n\nText.\n\n" +
		"| status | meaning |\n| --- | --- |\n| 0 | ok `a` |\n| 2 |  usage |\n\nAfter.\n| not | this |\n"
	for _, tc := range []struct {
		name, doc, heading string
		columns            int
		want               [][]string
		err                string
	}{
		{name: "the table under the heading", doc: doc, heading: "### Codes", columns: 2,
			want: [][]string{{"0", "ok `a`"}, {"2", "usage"}}},
		{name: "another heading's", doc: doc, heading: "### Other", columns: 2, want: [][]string{{"x", "y"}}},
		{name: "no heading", doc: doc, heading: "### Nope", columns: 2, err: `no "### Nope" heading`},
		{name: "a heading only as a prefix", doc: doc, heading: "### Cod", columns: 2, err: `no "### Cod" heading`},
		{name: "wrong columns", doc: doc, heading: "### Codes", columns: 3, err: "2 columns, want 3"},
		{name: "no table", doc: "x\n### H\ntext\n", heading: "### H", columns: 1, err: `no table rows under "### H"`},
		{name: "header only", doc: "x\n### H\n| a |\n|---|\n", heading: "### H", columns: 1, err: "no table rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Under(tc.doc, tc.heading, tc.columns)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}
}
