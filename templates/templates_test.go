package templates

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchkit/batchkit/internal/hostile"
)

// Every quoted value reaches a program byte for byte through real bash, and
// nothing in it executes.
func TestQuoteThroughBash(t *testing.T) {
	dir := t.TempDir()
	values := append(hostile.Strings(1, 400, true), "", "-n", "--", "'", `\\`)
	q, err := QuoteArgs(values)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", "printf '%s\\0' "+q)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(got) != len(values) {
		t.Fatalf("bash saw %d arguments, want %d", len(got), len(values))
	}
	for i := range values {
		if got[i] != values[i] {
			t.Errorf("value %d: bash saw %q, want %q", i, got[i], values[i])
		}
	}
	if _, err := os.Stat(filepath.Join(dir, hostile.Marker)); err == nil {
		t.Fatal("a quoted value executed a command")
	}
}

func TestQuoteRejectsNUL(t *testing.T) {
	if _, err := Quote("a\x00b"); err == nil {
		t.Error("Quote accepted a NUL byte")
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
		"":               `""`,
	} {
		got, err := DirectiveValue(in)
		if err != nil || got != want {
			t.Errorf("DirectiveValue(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestMissingKeyIsAnError(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, Sbatch), []byte("#!/bin/bash\n{{.NoSuchField}}\n"), 0o644)
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
		"source /opt/intel/oneapi/setvars.sh --force\n", "batchkit_had_A=${A+1} batchkit_was_A=${A-}\n",
		"if [ -n \"$batchkit_had_A\" ]; then A=$batchkit_was_A; else A='$(x)'; fi; export A\n",
		"srun batchkit exec -- python3 train.py\n"} {
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
		"Launch": []string{"true"},
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
