package profile

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
)

// The position scanner agrees with the document on everything the toml
// parser accepts that can hide a key: strings spanning lines, arrays with
// comments, inline tables, quoted and dotted keys, arrays of tables, CRLF.
func TestScanPositions(t *testing.T) {
	doc := strings.Join([]string{
		`# a comment with key = "value"`, // 1
		`description = """`,              // 2
		`fake = "not a key"`,             // 3
		`"""`,                            // 4
		`"quoted.key" = 'lit'`,           // 5
		`dotted.inner = 1`,               // 6
		``,                               // 7
		`[slurm] # trailing comment`,     // 8
		`  modules = [ # open`,           // 9
		`    "a", # one`,                 // 10
		`    "b",`,                       // 11
		`  ]`,                            // 12
		`time = '''`,                     // 13
		`x = 1'''`,                       // 14
		``,                               // 15
		`[[env.source]]`,                 // 16
		`script = "/a"`,                  // 17
		`[[env.source]]`,                 // 18
		`script = "/b"`,                  // 19
		`args = ["]", "\"#"]`,            // 20
		`[ env . vars ]`,                 // 21
		"A = { b = 1, c = [2, 3] }\r",    // 22
		`B = 1979-05-27 07:32:00`,        // 23
		`C = "after"`,                    // 24
	}, "\n")
	if _, err := toml.Decode(doc, new(map[string]any)); err != nil {
		t.Fatalf("test document does not parse: %v", err)
	}
	p := scanPositions(doc)
	keys := map[string]pos{
		"description":          {2, 1},
		`"quoted.key"`:         {5, 1},
		"dotted":               {6, 1},
		"dotted.inner":         {6, 1},
		"slurm":                {8, 2},
		"slurm.modules":        {9, 3},
		"slurm.time":           {13, 1},
		"env.source":           {16, 3},
		"env.source[0]":        {16, 3},
		"env.source[0].script": {17, 1},
		"env.source[1]":        {18, 3},
		"env.source[1].script": {19, 1},
		"env.source[1].args":   {20, 1},
		"env.vars":             {21, 3},
		"env.vars.A":           {22, 1},
		"env.vars.A.b":         {22, 7},
		"env.vars.A.c":         {22, 14},
		"env.vars.B":           {23, 1},
		"env.vars.C":           {24, 1},
	}
	vals := map[string]pos{
		"description":           {2, 15},
		"slurm.modules":         {9, 13},
		"slurm.modules[0]":      {10, 5},
		"slurm.modules[1]":      {11, 5},
		"slurm.time":            {13, 8},
		"env.source[1].args[1]": {20, 14},
		"env.vars.A.c[1]":       {22, 22},
		"env.vars.C":            {24, 5},
	}
	for k, want := range keys {
		if got, ok := p.key[k]; !ok || got != want {
			t.Errorf("key %s at %v (%v), want %v", k, got, ok, want)
		}
	}
	for k, want := range vals {
		if got, ok := p.val[k]; !ok || got != want {
			t.Errorf("value %s at %v (%v), want %v", k, got, ok, want)
		}
	}
	for _, k := range []string{"fake", "x", "slurm.x", "description.fake"} {
		if _, ok := p.key[k]; ok {
			t.Errorf("%s recorded as a key: it is inside a string", k)
		}
	}
}

func TestParentPath(t *testing.T) {
	tests := map[string]string{
		"a":                  "",
		"a.b":                "a",
		"env.source[1]":      "env.source",
		"env.source[1].args": "env.source[1]",
		`env.vars."a.b"`:     "env.vars",
		`env.vars."a\".b".c`: `env.vars."a\".b"`,
	}
	for in, want := range tests {
		if got := parentPath(in); got != want {
			t.Errorf("parentPath(%s) = %s, want %s", in, got, want)
		}
	}
	if diff := cmp.Diff(`a."b.c".d-e."x y"`, joinPath("a", "b.c", "d-e", "x y")); diff != "" {
		t.Error(diff)
	}
}

// Positions of problems inside the second of two array-of-tables entries
// point at that entry, not the first (toml's own key positions cannot).
func TestPositionsInArrayOfTables(t *testing.T) {
	src := `[mpi]
flavor = "mpich"

[[env.source]]
script = "/ok.sh"
args = ["a"]

[[env.source]]
script = "relative.sh"
args = "b"
`
	_, err := ParseFile("p.toml", []byte(src))
	got := []string{}
	for _, e := range Problems(err) {
		got = append(got, e.Error())
	}
	want := []string{
		`p.toml:10:8: env.source[1].args: want an array of strings, got string "b" (a list: ["b"])`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	src = strings.Replace(src, `args = "b"`, `args = ["b"]`, 1)
	_, err = ParseFile("p.toml", []byte(src))
	if err == nil || err.Error() != `p.toml:9:10: env.source[1].script: "relative.sh": want an absolute path` {
		t.Errorf("got %v", err)
	}
}

// A key defined twice is reported at its second definition, not where the
// toml parser stopped (which can be past the end of the line).
func TestDuplicateKeyPosition(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"scalar", "[mpi]\nflavor = \"openmpi\"\nflavor = \"mpich\"\n", "p.toml:3:1: Key 'mpi.flavor' has already been defined."},
		{"indented", "[mpi]\n  flavor = \"openmpi\"\n  flavor = \"mpich\"\n", "p.toml:3:3: Key 'mpi.flavor' has already been defined."},
		{"array value", "[mpi]\nargs = []\nargs = [\n  \"-v\",\n]\n", "p.toml:3:1: Key 'mpi.args' has already been defined."},
		{"dotted", "mpi.flavor = \"openmpi\"\n[mpi]\nflavor = \"mpich\"\n", "p.toml:3:1: Key 'mpi.flavor' has already been defined."},
		{"table", "[mpi]\nflavor = \"mpich\"\n[mpi]\n", "p.toml:3:2: Key 'mpi' has already been defined."},
		{"scalar then table", "slurm = 1\nslurm.time = \"1\"\n", "p.toml:2:1: Key 'slurm' has already been defined."},
		{"inline table", "[env]\nvars = { A = \"1\", A = \"2\" }\n", "p.toml:2:19: Key 'env.vars.A' has already been defined."},
		{"array of tables", "[[env.source]]\nscript = \"/a\"\n[[env.source]]\nscript = \"/b\"\nscript = \"/c\"\n", "p.toml:5:1: Key 'env.source.script' has already been defined."},
		{"quoted", "[env.vars]\n\"A\" = \"1\"\n\"A\" = \"2\"\n", "p.toml:3:1: Key 'env.vars.A' has already been defined."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff([]string{tt.want}, problemLines("p.toml", tt.src)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// A syntax error is reported where it is. The toml package counts a newline
// its lexer read past, so an unterminated table header was reported at the
// next line's key (issue 24 item 13); its byte offset is right.
func TestSyntaxErrorPosition(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"unterminated header before a key", "description = \"x\"\n[slurm\npartition = \"gpu\"\n",
			`p.toml:2:7: expected '.' or ']' to end table name, but got '\n' instead`},
		{"unterminated header before blank lines", "[slurm\n\n\npartition = \"gpu\"\n",
			`p.toml:1:7: expected '.' or ']' to end table name, but got '\n' instead`},
		{"unterminated header after a dot", "[mpi]\nflavor = \"mpich\"\n[slurm.\npartition = \"gpu\"\n",
			`p.toml:3:8: expected '.' or ']' to end table name, but got '\n' instead`},
		{"unterminated array header", "[[env.source]\nscript = \"/a\"\n",
			`p.toml:1:13: expected end of table array name delimiter ']', but got '\n' instead`},
		{"unterminated header at the end", "[slurm",
			`p.toml:1:6: expected '.' or ']' to end table name, but got '\x00' instead`},
		{"key without a value", "[slurm]\npartition\n",
			`p.toml:2:10: expected '.' or '=', but got '\n' instead`},
		{"unterminated string", "[slurm]\npartition = \"gpu\n",
			`p.toml:2:17: strings cannot contain newlines`},
		{"unterminated array", "[mpi]\nargs = [\"-v\",\n\"-x\"\n",
			`p.toml:3:5: expected a comma (',') or array terminator (']'), but got end of file`},
		// The toml package quotes what it read raw: the problem stays one line.
		{"newline in the quoted text", "[rendezvous]\nport = 0x\n",
			`p.toml:2:8: not a hexadecimal number: '0x\n'`},
		{"after a byte order mark", "\xef\xbb\xbf[slurm\npartition = \"gpu\"\n",
			`p.toml:1:7: expected '.' or ']' to end table name, but got '\n' instead`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff([]string{tt.want}, problemLines("p.toml", tt.src)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// problemLines parses src as the file path and lists its problems' lines.
func problemLines(path, src string) []string {
	_, err := ParseFile(path, []byte(src))
	var out []string
	for _, e := range Problems(err) {
		out = append(out, e.Error())
	}
	return out
}
