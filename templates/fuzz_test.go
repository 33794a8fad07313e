package templates

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template/parse"
)

// poison is in every string the fuzzed templates render: a value that
// reached a shell line unquoted would show it whole (q breaks it at the ',
// directive at the ", word refuses it; comment keeps it, in a # line).
const poison = `x'y"z$(touch PWNED)`

// FuzzSiteTemplate feeds the template checker site templates: Load must
// never panic, and a template it accepts must never print a value unquoted,
// whatever the template does with the data, nor include itself.
func FuzzSiteTemplate(f *testing.F) {
	for _, seed := range []string{
		`{{q .X}}`, `{{.X | printf "%s-1" | q}}`, `{{qargs .L}}`,
		`#SBATCH --x={{directive .X}} # {{comment .X}}`,
		`{{range .M}}{{word .}}={{q .}}{{end}}`, `{{$x := .X}}{{$x = .Y}}{{q $x}}`,
		`{{if .X}}{{with .L}}{{range .}}x{{end}}{{end}}{{end}}`, "echo {{.X}}",
		`{{define "x"}}{{q .X}}{{end}}{{template "x" .}}`, `{{define "x"}}{{template "x" .}}{{end}}{{template "x" .}}`,
		`{{q .X | printf "%s"}}`, `{{with .L}}{{index . 0}}{{end}}`, `{{printf "%s" .X | q | printf "%q"}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, Sbatch), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Load(dir)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("Load error is not one line: %q", err)
			}
			return
		}
		if loopsOnANumber(s) {
			return // {{range 1000000000}}: the author's own loop, not the checker's business
		}
		data := map[string]any{"X": poison, "Y": poison, "L": []string{poison, poison}, "M": map[string]string{poison: poison}}
		out, err := s.Render(Sbatch, data)
		if err != nil {
			// Load refuses include cycles, so no accepted template
			// recurses: its depth is at most the number of templates.
			if strings.Contains(err.Error(), "exceeded maximum template depth") {
				t.Fatalf("template %q passed Load and recursed: %v", text, err)
			}
			return // missing keys, word's refusals: errors, never output
		}
		for _, line := range strings.Split(out, "\n") {
			// In a line that starts with # (a comment to the shell, or an
			// #SBATCH line), comment prints the value as it is.
			if strings.Contains(line, poison) && !strings.HasPrefix(strings.TrimLeft(line, " \t"), "#") {
				t.Fatalf("template %q printed an unquoted value in the line %q", text, line)
			}
		}
	})
}

// loopsOnANumber reports a {{range N}} anywhere: it runs N times, which a
// fuzzed N makes for ever.
func loopsOnANumber(s *Set) bool {
	found := false
	for _, t := range s.t.Templates() {
		if t.Tree == nil {
			continue
		}
		visit(t.Tree.Root, func(n parse.Node) bool {
			if r, ok := n.(*parse.RangeNode); ok && r.Pipe != nil {
				for _, c := range r.Pipe.Cmds {
					for _, a := range c.Args {
						if _, ok := a.(*parse.NumberNode); ok {
							found = true
						}
					}
				}
			}
			return !found
		})
	}
	return found
}
