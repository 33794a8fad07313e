package envsetup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeWheels makes a prefix with the Intel MPI wheel's files, less skip.
func fakeWheels(t *testing.T, skip string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range wheelFiles {
		if f.path == skip {
			continue
		}
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestWheelsPrefix(t *testing.T) {
	good := fakeWheels(t, "")
	half := fakeWheels(t, "bin/hydra_pmi_proxy")
	for _, tc := range []struct {
		name, value, venv, want, err string
	}{
		{"a path", good, "", good, ""},
		{"the active venv", WheelsActive, good, good, ""},
		{"the active venv, a path beside it", good, "/elsewhere", good, ""},
		{"no venv active", WheelsActive, "", "", `no virtual environment is active: activate the one`},
		{"relative", "venv", "", "", `want an absolute path or $VIRTUAL_ENV`},
		{"missing", "/nonexistent/venv", "", "", `/nonexistent/venv is not a directory: create the environment and install the wheels there`},
		{"half-installed", half, "", "", `has no bin/hydra_pmi_proxy: the impi-rt wheel is missing or half-installed there (` + half + `/bin/pip install --force-reinstall impi-rt)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := WheelsPrefix(tc.value, tc.venv)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("WheelsPrefix(%q, %q) = %q, %v; want %q", tc.value, tc.venv, got, err, tc.want)
			}
		})
	}
}

func TestWheelsChanges(t *testing.T) {
	got := WheelsChanges("/v", map[string]string{"PATH": "/usr/bin:/v/bin", "I_MPI_ROOT": "/opt/intel/oneapi/mpi/latest"})
	want := map[string]string{
		"I_MPI_ROOT": "/v", "CCL_ROOT": "/v", "FI_PROVIDER_PATH": "/v/lib",
		"PATH":            "/v/bin/libfabric:/v/bin:/usr/bin",
		"LD_LIBRARY_PATH": "/v/lib",
	}
	if diff := cmp.Diff(want, got.Set); diff != "" {
		t.Errorf("WheelsChanges (-want +got):\n%s", diff)
	}
}

// The shell text does what WheelsChanges does, run by real bash.
func TestWheelsShell(t *testing.T) {
	text, err := WheelsShell("/v w", func(s string) (string, error) { return "'" + s + "'", nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"", "/usr/bin"} {
		before := map[string]string{"PATH": path}
		env := []string{"PATH=" + path} // bash sets a PATH of its own when there is none
		out, err := runBash(t, env, text+"builtin printf '%s\\n' \"$I_MPI_ROOT|$CCL_ROOT|$FI_PROVIDER_PATH|$PATH|${LD_LIBRARY_PATH-unset}\"")
		if err != nil {
			t.Fatal(err)
		}
		c := WheelsChanges("/v w", before)
		want := strings.Join([]string{c.Set["I_MPI_ROOT"], c.Set["CCL_ROOT"], c.Set["FI_PROVIDER_PATH"], c.Set["PATH"], c.Set["LD_LIBRARY_PATH"]}, "|")
		if strings.TrimSpace(out) != want {
			t.Errorf("PATH=%q: bash says %q, WheelsChanges %q", path, strings.TrimSpace(out), want)
		}
	}
}

// runBash runs script in bash --noprofile --norc with exactly env.
func runBash(t *testing.T, env []string, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", script)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}
