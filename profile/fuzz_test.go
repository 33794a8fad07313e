package profile

import (
	"os"
	"path/filepath"
	"testing"
)

// ParseFile never panics, and every problem it reports has a place in the
// file.
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
	f.Fuzz(func(t *testing.T, src []byte) {
		_, err := ParseFile("f.toml", src)
		for _, e := range Problems(err) {
			p, ok := e.(*Problem)
			if !ok {
				t.Fatalf("%T in the problems", e)
			}
			if p.Line < 1 || p.Col < 1 || p.File != "f.toml" {
				t.Fatalf("problem without a place: %+v", p)
			}
		}
	})
}
