package profile

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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
