package envsetup

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The bindings' setvars.sh is found through the interpreter's packages
// without importing them (the stand-ins raise on import), under either name.
func TestBindingsScript(t *testing.T) {
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	for _, tc := range []struct {
		name, pythonpath, want string
	}{
		{"oneccl_bindings_for_pytorch", "py/new", "py/new/oneccl_bindings_for_pytorch/env/setvars.sh"},
		{"torch_ccl, before 1.12", "py/old", "py/old/torch_ccl/env/setvars.sh"},
		{"the new name first", "py/old:py/new", "py/new/oneccl_bindings_for_pytorch/env/setvars.sh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dirs []string
			for _, d := range strings.Split(tc.pythonpath, ":") {
				dirs = append(dirs, abs(t, d))
			}
			t.Setenv("PYTHONPATH", strings.Join(dirs, ":"))
			s, err := BindingsScript(context.Background(), os.Environ(), "/usr/bin/python3", 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if want := abs(t, tc.want); s.Path != want || len(s.Args) != 0 {
				t.Fatalf("BindingsScript = %+v, want %s", s, want)
			}
			// And it sources as Intel's guides do, pointing at the package.
			ch, err := Runner{}.Source(context.Background(), os.Environ(), []Script{s})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := ch.Set["CCL_ROOT"], filepath.Dir(filepath.Dir(s.Path)); got != want {
				t.Errorf("CCL_ROOT = %q, want %q", got, want)
			}
		})
	}
}

func TestBindingsScriptErrors(t *testing.T) {
	dir := t.TempDir()
	slow := filepath.Join(dir, "slow-python")
	os.WriteFile(slow, []byte("#!/bin/sh\nsleep 30\n"), 0o755)
	t.Setenv("PYTHONPATH", "")
	for _, tc := range []struct {
		name, python string
		want         error
		in           string
	}{
		{"not installed", "/usr/bin/python3", ErrNoBindings, "with /usr/bin/python3"},
		{"no such python", filepath.Join(dir, "python9"), nil, "python9"},
		{"a python that never answers", slow, ErrTimeout, "slow-python"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == ErrNoBindings {
				if _, err := exec.LookPath(tc.python); err != nil {
					t.Skip("no /usr/bin/python3")
				}
			}
			start := time.Now()
			_, err := BindingsScript(context.Background(), os.Environ(), tc.python, 500*time.Millisecond)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.in) {
				t.Fatalf("BindingsScript(%s) = %v, want %v naming %q", tc.python, err, tc.want, tc.in)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// SourceEnv finds the bindings with the python on the PATH the profile's
// scripts set (as the guides do: setvars.sh first, then python -c ...),
// and sources their setvars.sh after the scripts.
func TestSourceEnvBindings(t *testing.T) {
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	// The only python that knows the bindings, on PATH only after sourcing.
	py := "#!/bin/sh\nPYTHONPATH=" + abs(t, "py/new") + " exec /usr/bin/python3 \"$@\"\n"
	os.WriteFile(filepath.Join(bin, "envpython"), []byte(py), 0o755)
	vars := filepath.Join(dir, "vars.sh")
	os.WriteFile(vars, []byte("export PATH=\""+bin+":$PATH\"\n"), 0o644)
	ch, err := Runner{Timeout: 20 * time.Second}.SourceEnv(context.Background(), os.Environ(), []Script{{Path: vars}}, true, "envpython")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ch.Set["CCL_ROOT"], abs(t, "py/new/oneccl_bindings_for_pytorch"); got != want {
		t.Errorf("CCL_ROOT = %q, want %q", got, want)
	}
	if !strings.HasPrefix(ch.Set["PATH"], bin+":") {
		t.Errorf("PATH = %q, want the script's %s first", ch.Set["PATH"], bin)
	}
	// Without the script's PATH there is no envpython: nothing is applied.
	if ch, err := (Runner{}).SourceEnv(context.Background(), os.Environ(), nil, true, "envpython"); err == nil || !ch.Empty() {
		t.Errorf("SourceEnv without the script = %v, %v; want an error and no changes", ch, err)
	}
}

// BindingsShell's text, run by bash as a batch script would, sources the
// bindings' setvars.sh; without bindings, set -e stops at it, saying why.
func TestBindingsShell(t *testing.T) {
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	text, err := BindingsShell("/usr/bin/python3")
	if err != nil {
		t.Fatal(err)
	}
	script := "set -euo pipefail\n" + text + "echo \"CCL_ROOT=$CCL_ROOT\"\n"
	for _, tc := range []struct {
		name, pythonpath, want string
		fails                  bool
	}{
		{"installed", abs(t, "py/new"), "CCL_ROOT=" + abs(t, "py/new/oneccl_bindings_for_pytorch"), false},
		{"not installed", "", noBindings, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("bash", "-c", script)
			cmd.Env = append(os.Environ(), "PYTHONPATH="+tc.pythonpath)
			out, err := cmd.CombinedOutput()
			if (err != nil) != tc.fails || !strings.Contains(string(out), tc.want) {
				t.Errorf("bash: %v\n%s\nwant failure %v and %q", err, out, tc.fails, tc.want)
			}
		})
	}
}

// One timeout bounds the scripts and the bindings together: a python that
// never answers after scripts that took most of it ends the whole at the
// timeout, not a second timeout later.
func TestSourceEnvOneDeadline(t *testing.T) {
	dir := t.TempDir()
	slowPy := filepath.Join(dir, "python")
	os.WriteFile(slowPy, []byte("#!/bin/sh\nsleep 30\n"), 0o755)
	script := filepath.Join(dir, "vars.sh")
	os.WriteFile(script, []byte("sleep 0.6\n"), 0o644)
	start := time.Now()
	_, err := Runner{Timeout: time.Second}.SourceEnv(context.Background(), os.Environ(), []Script{{Path: script}}, true, slowPy)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("SourceEnv = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 1800*time.Millisecond {
		t.Errorf("took %v with a 1 s timeout", d)
	}
}
