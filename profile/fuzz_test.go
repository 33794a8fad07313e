package profile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ParseFile never panics, and every problem it reports has a place in the
// file and one line of text.
func FuzzParseFile(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.toml")
	more, _ := filepath.Glob("../site-configs/*.toml")
	for _, p := range append(seeds, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("[[env.source]]\nscript = '''\n[x]\n'''\n[env.vars]\n\"a b\" = \"\"\n"))
	f.Add([]byte("[env.vars]\n\"a\\nb\" = 1\n"))
	f.Add([]byte("[rendezvous]\nport = 0x\n[slurm\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		_, err := ParseFile("f.toml", src)
		lines := strings.Count(string(src), "\n") + 1
		for _, e := range Problems(err) {
			p, ok := e.(*Problem)
			if !ok {
				t.Fatalf("%T in the problems", e)
			}
			if p.Line < 1 || p.Col < 1 || p.File != "f.toml" {
				t.Fatalf("problem without a place: %+v", p)
			}
			if p.Line > lines {
				t.Fatalf("problem at line %d of a %d-line file: %+v", p.Line, lines, p)
			}
			if strings.ContainsAny(p.Msg, "\n\r") {
				t.Fatalf("problem spans lines: %q", p.Msg)
			}
		}
	})
}

// Resolved.Set never panics on a --set KEY=VALUE, and refuses a bad one with
// one line of text.
func FuzzSet(f *testing.F) {
	for _, kv := range [][2]string{
		{"mpi.args", `["--mca","a,b"]`},
		{"mpi.args", "[\"a\"]\nslurm.partition = \"x\""},
		{"mpi.args", `[1,2]`},
		{"slurm.modules", "a/1, b/2"},
		{"env.source", `[{ script = "/a.sh", args = ["x"] }]`},
		{"env.vars.A\nB", "\"x\"\ny"},
		{"slurm.partition", `'gpu`},
		{"rendezvous.port", "29500"},
	} {
		f.Add(kv[0], kv[1])
	}
	f.Fuzz(func(t *testing.T, key, value string) {
		err := Merge().Set(key, value, CommandLine)
		if err != nil && strings.ContainsAny(err.Error(), "\n\r") {
			t.Fatalf("Set(%q, %q) error spans lines: %q", key, value, err)
		}
	})
}
