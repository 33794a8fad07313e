package templates

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeDir writes files into a new directory and returns it.
func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// diffErr fails t unless err says prefix+want, or is nil when want
// is "".
func diffErr(t *testing.T, what string, err error, prefix, want string) {
	t.Helper()
	var got string
	if err != nil {
		got = err.Error()
	}
	if want != "" {
		want = prefix + want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s error (-want +got):\n%s", what, diff)
	}
}

// An include of a template that does not exist, and an include cycle, are
// refused when the directory is loaded, with the file, line and column of
// the include and the cycle named: at run time text/template would recurse
// 100,000 levels deep, or fail only when the include's branch is taken.
func TestIncludeProblems(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string
		err   string // after "template directory DIR: "; "" for one that loads
	}{
		{"self", map[string]string{Sbatch: "#!/bin/bash\n{{template \"sbatch.sh.tmpl\" .}}"},
			`sbatch.sh.tmpl:2:11: {{template "sbatch.sh.tmpl" .}} includes "sbatch.sh.tmpl" itself: a template may not include itself`},
		{"self, in a branch not taken", map[string]string{Sbatch: `{{if false}}{{template "sbatch.sh.tmpl" .}}{{end}}`},
			`sbatch.sh.tmpl:1:23: {{template "sbatch.sh.tmpl" .}} includes "sbatch.sh.tmpl" itself: a template may not include itself`},
		{"a, b, a", map[string]string{
			Sbatch:   `{{template "a.tmpl" .}}`,
			"a.tmpl": "# a\n{{template \"b.tmpl\" .}}",
			"b.tmpl": "# b\n{{template \"a.tmpl\" .}}",
		}, `b.tmpl:2:11: {{template "a.tmpl" .}} makes an include cycle: "a.tmpl" → "b.tmpl" → "a.tmpl": a template may not include itself, even through others`},
		{"through defines", map[string]string{
			Sbatch:     `{{template "launch" .}}`,
			"lib.tmpl": "{{define \"launch\"}}{{template \"line\" .}}{{end}}\n{{define \"line\"}}{{template \"launch\" .}}{{end}}",
		}, `lib.tmpl:2:28: {{template "launch" .}} makes an include cycle: "launch" → "line" → "launch": a template may not include itself, even through others`},
		{"a define of itself", map[string]string{Sbatch: `{{define "x"}}{{template "x" .}}{{end}}{{template "x" .}}`},
			`sbatch.sh.tmpl:1:25: {{template "x" .}} includes "x" itself: a template may not include itself`},
		{"missing", map[string]string{Sbatch: "#!/bin/bash\n{{if .Requeue}}{{template \"missing.tmpl\" .}}{{end}}"},
			`sbatch.sh.tmpl:2:26: {{template "missing.tmpl" .}} includes "missing.tmpl", which no template defines (a file name with .tmpl, or a {{define}})`},
		{"an empty define is defined", map[string]string{Sbatch: `{{define "x"}}{{end}}{{template "x" .}}{{qargs .Launch}}`}, ""},
		{"a diamond is no cycle", map[string]string{
			Sbatch:   `{{template "a.tmpl" .}}{{template "b.tmpl" .}}`,
			"a.tmpl": `{{template "c.tmpl" .}}`, "b.tmpl": `{{template "c.tmpl" .}}`, "c.tmpl": `{{qargs .Launch}}`,
		}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, tt.files)
			_, err := Load(dir)
			diffErr(t, "Load", err, "template directory "+dir+": ", tt.err)
		})
	}
}

// script is a stand-in for the script batchkit renders: a struct, as
// slurm.Script is, so that a field it lacks is an error.
type script struct {
	Profile string
	Launch  []string
	Requeue bool
}

// What loading cannot see fails when the templates are rendered with
// samples, with the file (the included one when the problem is there),
// line and column, and which sample it was.
func TestCheck(t *testing.T) {
	samples := map[string][]Sample{Sbatch: {
		{What: "a full sample", Data: script{Profile: "p", Launch: []string{"x"}, Requeue: true}},
		{What: "a minimal sample", Data: script{Launch: []string{"x"}}},
	}}
	for _, tt := range []struct {
		name  string
		files map[string]string
		err   string // after "rendering sbatch.sh.tmpl: template directory DIR: "; "" for none
	}{
		{"good", map[string]string{Sbatch: "#!/bin/bash\n# {{comment .Profile}}\n{{qargs .Launch}}\n"}, ""},
		{"no such field", map[string]string{Sbatch: "#!/bin/bash\n# {{comment .NoSuchField}}\n"},
			`sbatch.sh.tmpl:2:12: executing "sbatch.sh.tmpl" at <.NoSuchField>: can't evaluate field NoSuchField in type templates.script (with a full sample)`},
		{"in an included file", map[string]string{Sbatch: "#!/bin/bash\n{{template \"pro.tmpl\" .}}", "pro.tmpl": "# a\n# {{comment .Profil}}\n"},
			`pro.tmpl:2:12: executing "pro.tmpl" at <.Profil>: can't evaluate field Profil in type templates.script (with a full sample)`},
		{"in a define", map[string]string{Sbatch: `{{template "l" .}}`, "lib.tmpl": "{{define \"l\"}}\n{{qargs .Lanch}}{{end}}"},
			`lib.tmpl:2:8: executing "l" at <.Lanch>: can't evaluate field Lanch in type templates.script (with a full sample)`},
		{"in the else branch", map[string]string{Sbatch: "{{if .Requeue}}{{else}}\n{{q .Requeu}}{{end}}"},
			`sbatch.sh.tmpl:2:4: executing "sbatch.sh.tmpl" at <.Requeu>: can't evaluate field Requeu in type templates.script (with a minimal sample)`},
		{"a value word refuses", map[string]string{Sbatch: "export {{word (index .Launch 0)}}X={{word .Profile}}"},
			`sbatch.sh.tmpl:1:37: executing "sbatch.sh.tmpl" at <word .Profile>: error calling word: "" is not a plain word (letters, digits, _ . -), which is all a name may be here (with a minimal sample)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, tt.files)
			s, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			diffErr(t, "Check", s.Check(samples), "rendering sbatch.sh.tmpl: template directory "+dir+": ", tt.err)
		})
	}
	s, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(nil); err == nil || err.Error() != "no sample to render sbatch.sh.tmpl with" {
		t.Errorf("Check without samples: err = %v", err)
	}
}

// A template directory that is not one is a one-line error naming it,
// and a FIFO is not opened (which would block for ever).
func TestTemplateDirNotADirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	fifo := filepath.Join(dir, "fifo")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{file, "template directory " + file + ": is a regular file, not a directory"},
		{fifo, "template directory " + fifo + ": is a FIFO, not a directory"},
		{"/dev/null", "template directory /dev/null: is a character device, not a directory"},
	} {
		_, err := Load(tt.path)
		var nde *NotDirError
		if !errors.As(err, &nde) || err.Error() != tt.want {
			t.Errorf("Load(%s): err = %v, want a *NotDirError %q", tt.path, err, tt.want)
		}
	}
	missing := filepath.Join(dir, "missing")
	if _, err := Load(missing); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "reading template directory "+missing+": ") {
		t.Errorf("Load of a missing directory: err = %v", err)
	}
}

// A render error unwraps to what the function returned, and says whether
// the template was the site's or batchkit's own.
func TestRenderErrorWhere(t *testing.T) {
	s, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Render(Sbatch, script{})
	var re *RenderError
	if !errors.As(err, &re) || re.Where != "embedded template" || !strings.HasPrefix(err.Error(), "rendering sbatch.sh.tmpl: embedded template: sbatch.sh.tmpl:") {
		t.Errorf("Render of the embedded template with too little data: err = %v", err)
	}
}
