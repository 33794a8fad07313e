package templates

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The environment block of the generated script, in real bash under
// set -euo pipefail: a sourced script sets A, B, E and S; the profile sets
// A, B, E and Q. The profile's value beats the script's, except where the
// user had exported the variable before the job started (B, E): the user's
// value wins, even an empty one, even though the script changed it. Values
// with quotes, newlines and $ arrive byte for byte.
func TestSbatchScriptEnv(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	sets, err := filepath.Abs("testdata/sets-a-b.sh")
	if err != nil {
		t.Fatal(err)
	}
	const tricky = "it's \"quoted\"\nline two $HOME `x` \\ $(touch PWNED)"
	for _, tc := range []struct {
		name string
		user []string // exported before the job starts
		want map[string]string
	}{
		{
			name: "no user values",
			want: map[string]string{"A": "profile", "B": "profile", "E": "profile", "Q": tricky, "S": "script"},
		},
		{
			name: "the user's values win",
			user: []string{"B=user", "E=", "Q=" + tricky + " (user)"},
			want: map[string]string{"A": "profile", "B": "user", "E": "", "Q": tricky + " (user)", "S": "script"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"A": "profile", "B": "profile", "E": "profile", "Q": tricky}
			out, stderr, err := runJob(t, []string{sets}, env, tc.user)
			if err != nil {
				t.Fatalf("the script failed: %v\nstderr:\n%s", err, stderr)
			}
			got := map[string]string{}
			for _, kv := range strings.Split(out, "\x00") {
				if k, v, ok := strings.Cut(kv, "="); ok && strings.Contains(" A B E Q S ", " "+k+" ") {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("the program's environment (-want +got):\n%s\nstderr:\n%s", diff, stderr)
			}
		})
	}
}

// A script that fails (returns non-zero) or is missing stops the job before
// the launch line, with one line that names it.
func TestSbatchScriptSourceFails(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	fails, err := filepath.Abs("testdata/fails.sh")
	if err != nil {
		t.Fatal(err)
	}
	sets, _ := filepath.Abs("testdata/sets-a-b.sh")
	missing := filepath.Join(t.TempDir(), "no such dir", "setvars.sh")
	for _, tc := range []struct {
		name, script, want string
	}{
		{"returns 3", fails, "batchkit: sourcing " + fails + " failed (exit 3): stopping the job\n"},
		{"missing", missing, "batchkit: sourcing " + missing + " failed (exit 1): stopping the job\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := runJob(t, []string{sets, tc.script, sets}, map[string]string{"A": "profile"}, nil)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("the script: %v, want exit 1\nstderr:\n%s", err, stderr)
			}
			if out != "" {
				t.Errorf("the launch line ran after a failed source: stdout %q", out)
			}
			if !strings.HasSuffix(stderr, tc.want) {
				t.Errorf("stderr %q, want it to end with %q", stderr, tc.want)
			}
		})
	}
}

// runJob renders the batch script with sources and env, a launch line of
// `env -0`, and runs it in bash with user added to the environment. It
// returns the launch line's output and the script's stderr.
func runJob(t *testing.T, sources []string, env map[string]string, user []string) (stdout, stderr string, err error) {
	t.Helper()
	set, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	var srcs []map[string]any
	for _, s := range sources {
		srcs = append(srcs, map[string]any{"Path": s, "Args": []string{"--force"}})
	}
	var vars []map[string]string
	for _, k := range sortedKeys(env) {
		vars = append(vars, map[string]string{"Name": k, "Value": env[k]})
	}
	script, err := set.Render(Sbatch, map[string]any{
		"Profile": "p", "Directives": []map[string]string{}, "Modules": []string{}, "Sources": srcs,
		"Env": vars, "Launch": []string{"env", "-0"}, "Requeue": false, "Bindings": nil, "Wheels": "", "ShieldUSR1": false,
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", path)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.Contains(" A B E Q S ", " "+k+" ") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, user...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if _, serr := os.Stat(filepath.Join(dir, "PWNED")); serr == nil {
		t.Fatalf("a value executed a command; the script:\n%s", script)
	}
	if t.Failed() || err != nil {
		t.Logf("the script:\n%s", script)
	}
	return out.String(), errb.String(), err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
