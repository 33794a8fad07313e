package templates

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/internal/hostile"
	"github.com/batchkit/batchkit/internal/shquote"
)

// render runs text, a site's replacement for the batch script, on data.
func render(t *testing.T, text string, data any) (string, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, Sbatch), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s.Render(Sbatch, data)
}

// Every value qargs quotes reaches a program byte for byte through real
// bash (the batch script's shell), and nothing in it executes. The
// quoting itself is internal/shquote's, tested there in dash, bash and zsh.
func TestQuoteThroughBash(t *testing.T) {
	dir := t.TempDir()
	values := append(hostile.Strings(1, 400, true), "", "-n", "--", "'", `\\`, "=ls", "~root", "#x")
	script, err := render(t, `printf '%s\0' {{qargs .}}`, values)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if diff := cmp.Diff(values, got); diff != "" {
		t.Errorf("bash saw other arguments (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, hostile.Marker)); err == nil {
		t.Fatal("a quoted value executed a command")
	}
}

// A NUL byte fails the render with shquote.ErrNUL, for q and qargs alike;
// a line break fails a directive.
func TestQuoteRejectsNUL(t *testing.T) {
	for _, c := range []struct {
		text string
		data any
	}{
		{`{{q .}}`, "a\x00b"},
		{`{{qargs .}}`, []string{"ok", "a\x00b"}},
	} {
		if _, err := render(t, c.text, c.data); !errors.Is(err, shquote.ErrNUL) {
			t.Errorf("%s of a NUL byte: err = %v, want shquote.ErrNUL", c.text, err)
		}
	}
	if _, err := DirectiveValue("a\nb"); err == nil {
		t.Error("DirectiveValue accepted a newline")
	}
}

func TestDirectiveValue(t *testing.T) {
	for in, want := range map[string]string{
		"train":          "train",
		"node[1-2]":      `"node[1-2]"`,
		"a b":            `"a b"`,
		`say "hi" \o/`:   `"say \"hi\" \\o/"`,
		"#not a comment": `"#not a comment"`,
	} {
		got, err := DirectiveValue(in)
		if err != nil || got != want {
			t.Errorf("DirectiveValue(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// A flag without a value never becomes --flag="" (issue 30 item 19: the
// site-admin guide's template rendered #SBATCH --exclusive=""): directive
// refuses "", so such a template fails at profile check, whose sample has a
// flag without a value, and never renders.
func TestDirectiveWithoutValue(t *testing.T) {
	if got, err := DirectiveValue(""); err == nil || !strings.Contains(err.Error(), "{{if .Value}}") {
		t.Errorf(`DirectiveValue("") = %q, %v; want an error saying how to print the flag alone`, got, err)
	}
	dir := t.TempDir()
	tmpl := "#!/bin/bash\n{{range .Directives}}#SBATCH --{{word .Flag}}={{directive .Value}}\n{{end}}exec {{qargs .Launch}}\n"
	os.WriteFile(filepath.Join(dir, Sbatch), []byte(tmpl), 0o644)
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{"Directives": []map[string]string{{"Flag": "exclusive", "Value": ""}}, "Launch": []string{"true"}}
	if out, err := s.Render(Sbatch, data); err == nil {
		t.Errorf("rendered %q; want an error for --exclusive's empty value", out)
	}
}

func TestMissingKeyIsAnError(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, Sbatch), []byte("#!/bin/bash\n{{q .NoSuchField}}\n"), 0o644)
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Render(Sbatch, map[string]any{"Launch": []string{"x"}}); err == nil || !strings.Contains(err.Error(), "NoSuchField") {
		t.Errorf("Render with a missing key: err = %v, want one naming NoSuchField", err)
	}
}

// A site's directory replaces the embedded template of the same name.
func TestOverride(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, Sbatch), []byte("#!/bin/bash\n# site template\n{{qargs .Launch}}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "README"), []byte("not a template"), 0o644)
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Render(Sbatch, map[string]any{"Launch": []string{"echo", "a b"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "#!/bin/bash\n# site template\necho 'a b'\n"; got != want {
		t.Errorf("override rendered %q, want %q", got, want)
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil {
		t.Error("Load of a missing directory succeeded")
	}
	os.WriteFile(filepath.Join(dir, Sbatch), []byte("{{if}}"), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), Sbatch) {
		t.Errorf("a broken override: err = %v, want one naming the file", err)
	}
}

// A site template prints values only through the quoting functions: an
// action that prints anything else is refused when the directory is
// loaded, with file:line:col, so a template that forgets q never reaches a
// job script.
func TestSiteTemplatesMustQuote(t *testing.T) {
	tests := []struct {
		name, text string
		err        string // "" for a template that loads
	}{
		{"quoted", `{{q .X}}`, ""},
		{"quoted through a pipe", `{{.X | printf "%s-1" | q}}`, ""},
		{"lists", `{{qargs .Launch}}`, ""},
		{"directive and comment", `#SBATCH --x={{directive .V}} # {{comment .P}}`, ""},
		{"a plain word", `{{range .Env}}{{word .Name}}={{q .Value}}{{end}}`, ""},
		{"assignments print nothing", `{{$x := .X}}{{$x = .Y}}{{q $x}}`, ""},
		{"a constant is the author's", `{{"#!/bin/bash"}}{{3}}`, ""},
		{"control pipelines print nothing", `{{if .X}}{{with .Y}}{{range .Z}}x{{end}}{{end}}{{end}}`, ""},
		{"bare field", "#!/bin/bash\necho {{.JobName}}", Sbatch + `:2:7: {{.JobName}} prints a value unquoted: end the action with one of q, qargs, directive, comment, word`},
		{"quoted, then re-printed", `{{q .X | printf "%s"}}`, "prints a value unquoted"},
		{"printf", `{{printf "%s" .X}}`, "prints a value unquoted"},
		{"variable", `{{$x := .X}}{{$x}}`, "{{$x}} prints a value unquoted"},
		{"inside if", `{{if .X}}ok{{else}}{{.Y}}{{end}}`, "{{.Y}} prints"},
		{"inside range", `{{range .L}}{{.}}{{end}}`, "{{.}} prints"},
		{"inside with", `{{with .L}}{{index . 0}}{{end}}`, "prints a value unquoted"},
		{"inside a define", `{{define "x"}}{{.Y}}{{end}}{{template "x" .}}`, "{{.Y}} prints"},
		{"comment in a comment line", "echo a\n  # was {{comment .P}}{{if .Q}} and {{comment .Q}}{{end}}\n", ""},
		{"comment in a command", "#!/bin/bash\necho {{comment .P}}", Sbatch + `:2:7: {{comment .P}} comment makes a value safe only in a line that starts with #`},
		{"directive after a line break", "#SBATCH --x=1\nx={{directive .V}}", "directive makes a value safe only in a line that starts with #"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, Sbatch), []byte(tt.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("Load: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "\n")):
				t.Errorf("Load: err = %v, want one line containing %q", err, tt.err)
			case tt.err != "" && !strings.Contains(err.Error(), dir):
				t.Errorf("Load: err = %v, want it to name the directory", err)
			}
		})
	}
}

// A file in the directory either replaces a template batchkit renders or
// is included by one: a misspelt name is an error, not the embedded
// template used without a word.
func TestSiteTemplateNames(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string
		err   string
	}{
		{"misspelt", map[string]string{"sbatch.tmpl": "{{qargs .Launch}}"},
			"sbatch.tmpl: batchkit renders only sbatch.sh.tmpl, and no template includes this one"},
		{"without .tmpl", map[string]string{"sbatch.sh": "{{qargs .Launch}}"}, "did you mean sbatch.sh.tmpl?"},
		{"other files are not templates", map[string]string{"README": "{{.X}}", "notes.txt": "x"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeDir(t, tt.files))
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("Load: err = %v, want %q", err, tt.err)
			}
		})
	}

	// Included files and files of {{define}}s are the site's library.
	dir := writeDir(t, map[string]string{
		Sbatch:          `{{template "prologue.tmpl" .}}{{template "launch" .}}`,
		"prologue.tmpl": "#!/bin/bash\n# {{comment .P}}\n",
		"lib.tmpl":      `{{define "launch"}}{{qargs .Launch}}{{end}}`,
	})
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Render(Sbatch, map[string]any{"P": "site", "Launch": []string{"srun", "a b"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "#!/bin/bash\n# site\nsrun 'a b'"; got != want {
		t.Errorf("rendered %q, want %q", got, want)
	}
}

func TestWord(t *testing.T) {
	for _, ok := range []string{"OMP_NUM_THREADS", "job-name", "gres", "a.b", "_x", "9"} {
		if got, err := Word(ok); err != nil || got != ok {
			t.Errorf("Word(%q) = %q, %v", ok, got, err)
		}
	}
	for _, bad := range []string{"", "-x", "a b", "a;b", "$(x)", "a\nb", "a=b", "ä"} {
		if _, err := Word(bad); err == nil {
			t.Errorf("Word(%q) passed", bad)
		}
	}
}

// The embedded sbatch template passes bash -n with every section present.
func TestSbatchTemplateSyntax(t *testing.T) {
	s, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{
		"Profile":    "p",
		"Directives": []map[string]string{{"Flag": "job-name", "Value": "x y"}, {"Flag": "exclusive", "Value": ""}},
		"Modules":    []string{"intel/oneapi"},
		"Sources":    []map[string]any{{"Path": "/opt/intel/oneapi/setvars.sh", "Args": []string{"--force"}}},
		"Env":        []map[string]string{{"Name": "A", "Value": "$(x)"}},
		"Launch":     []string{"srun", "batchkit", "exec", "--", "python3", "train.py"},
		"Requeue":    true,
		"Bindings":   map[string]string{"Python": "/opt/conda/bin/python", "Probe": "import sys; print(sys.prefix)"},
		"Wheels":     "/opt/venv",
		"ShieldUSR1": false,
	}
	out, err := s.Render(Sbatch, data)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-n")
	cmd.Stdin = strings.NewReader(out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bash -n: %v\n%s\n%s", err, stderr.String(), out)
	}
	for _, want := range []string{"#SBATCH --job-name=\"x y\"\n", "#SBATCH --exclusive\n", "module load intel/oneapi\n",
		"source /opt/intel/oneapi/setvars.sh --force || batchkit_source_failed /opt/intel/oneapi/setvars.sh\n",
		"for batchkit_v in A; do\n", "batchkit_export A '$(x)'\n",
		"srun batchkit exec -- python3 train.py &\n", "\tscontrol requeue \"$SLURM_JOB_ID\""} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered script lacks %q:\n%s", want, out)
		}
	}
}

// A profile named with a line break (a file name may hold one) cannot break
// out of the script's comment into a command.
func TestProfileNameStaysInTheComment(t *testing.T) {
	s, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{
		"Profile":    "./evil\ntouch PWNED\r\x1b.toml",
		"Directives": []map[string]string{},
		"Modules":    []string{}, "Sources": []map[string]any{}, "Env": []map[string]string{},
		"Launch": []string{"true"}, "Requeue": false, "Bindings": nil, "Wheels": "", "ShieldUSR1": false,
	}
	out, err := s.Render(Sbatch, data)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "touch PWNED") && !strings.HasPrefix(line, "# ") {
			t.Errorf("the profile name left the comment: %q", line)
		}
	}
	if want := `from profile ./evil\ntouch PWNED\r\x1b.toml.`; !strings.Contains(out, want) {
		t.Errorf("rendered script lacks %q:\n%s", want, out)
	}
}

func TestComment(t *testing.T) {
	for in, want := range map[string]string{
		"plain name.toml": "plain name.toml",
		"a\nb":            `a\nb`,
		"tab\there":       `tab\there`,
		"ünïcode $(x)":    "ünïcode $(x)",
		"nul\x00":         `nul\x00`,
	} {
		if got := Comment(in); got != want {
			t.Errorf("Comment(%q) = %q, want %q", in, got, want)
		}
	}
}

// The profile's variables beat what an environment script sets, but the
// value the job already had when it was submitted (sbatch exports the
// submitting shell's environment) is kept, whatever the scripts do: the
// script runs in real bash.
func TestProfileVariablesKeepTheUsers(t *testing.T) {
	s, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	vendor := filepath.Join(dir, "setvars.sh")
	if err := os.WriteFile(vendor, []byte("export CCL_WORKER_COUNT=vendor FI_PROVIDER=vendor\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := map[string]any{
		"Profile": "p", "Directives": []map[string]string{}, "Modules": []string{},
		"Sources": []map[string]any{{"Path": vendor, "Args": []string{}}},
		"Env":     []map[string]string{{"Name": "CCL_WORKER_COUNT", "Value": "1"}, {"Name": "FI_PROVIDER", "Value": "psm3"}, {"Name": "I_MPI_PIN_DOMAIN", "Value": "socket"}},
		"Launch":  []string{"sh", "-c", `echo "$CCL_WORKER_COUNT $FI_PROVIDER $I_MPI_PIN_DOMAIN"`},
		"Requeue": false, "Bindings": nil, "Wheels": "", "ShieldUSR1": false,
	}
	script, err := s.Render(Sbatch, data)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, "1 psm3 socket"},
		{[]string{"CCL_WORKER_COUNT=4"}, "4 psm3 socket"},
		{[]string{"FI_PROVIDER=", "I_MPI_PIN_DOMAIN=core"}, "1  core"}, // set, even empty, is the user's
	} {
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, tc.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("env %q: %v\n%s", tc.env, err, out)
		}
		if got := strings.TrimSuffix(string(out), "\n"); got != tc.want {
			t.Errorf("env %q: the program saw %q, want %q", tc.env, got, tc.want)
		}
	}
}

// The batch script's block for env.intel_wheels is envsetup.WheelsShell's
// text, line for line: what batchkit envsetup and mpirun set, the job sets.
func TestSbatchWheelsMatchEnvsetup(t *testing.T) {
	s, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	prefix := "/opt/my venv"
	out, err := s.Render(Sbatch, map[string]any{
		"Profile": "p", "Directives": []map[string]string{}, "Modules": []string{}, "Sources": []map[string]any{},
		"Env": []map[string]string{}, "Launch": []string{"true"}, "Requeue": false, "Bindings": nil, "Wheels": prefix, "ShieldUSR1": false,
	})
	if err != nil {
		t.Fatal(err)
	}
	want, err := envsetup.WheelsShell(prefix, shquote.Quote)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "\n"+want) {
		t.Errorf("the batch script lacks envsetup.WheelsShell's lines:\n%s\n--- script\n%s", want, out)
	}
}
