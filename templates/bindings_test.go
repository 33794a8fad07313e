package templates

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The batch script sources the oneCCL bindings' env/setvars.sh from the
// directory the job's python prints, after the profile's scripts; a python
// that finds none stops the job, saying so.
func TestBindingsInBatchScript(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	set, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pkg := filepath.Join(dir, "pkg with 'quote")
	os.MkdirAll(filepath.Join(pkg, "env"), 0o755)
	os.WriteFile(filepath.Join(pkg, "env", "setvars.sh"), []byte("export CCL_ROOT=from-bindings\n"), 0o644)
	for _, tc := range []struct {
		name, probe, want string
		fails             bool
	}{
		{"found", "print(" + pyString(pkg) + ")", "CCL_ROOT=from-bindings", false},
		{"not installed", "import sys; sys.exit('neither is installed')", "batchkit: sourcing the oneCCL bindings' env/setvars.sh failed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script, err := set.Render(Sbatch, map[string]any{
				"Profile": "p", "Directives": []map[string]string{}, "Modules": []string{}, "Sources": []map[string]any{},
				"Env": []map[string]string{}, "Launch": []string{"sh", "-c", "echo CCL_ROOT=$CCL_ROOT"}, "Requeue": false,
				"Bindings": map[string]string{"Python": "python3", "Probe": tc.probe}, "Wheels": "", "ShieldUSR1": false,
			})
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("bash", "-c", script).CombinedOutput()
			if (err != nil) != tc.fails || !strings.Contains(string(out), tc.want) {
				t.Errorf("bash: %v\n%s\nwant failure %v and %q; the script:\n%s", err, out, tc.fails, tc.want, script)
			}
		})
	}
}

// pyString is s as a Python string literal (the test's paths hold quotes).
func pyString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
