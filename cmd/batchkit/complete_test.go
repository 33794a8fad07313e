package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/internal/clitree"
)

func TestCompletions(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	for _, tc := range []struct {
		name  string
		words []string
		want  []string
	}{
		{"nothing typed", nil, []string{"env", "exec", "run", "sbatch", "hostlist", "profile", "mpirun", "envsetup", "bench", "doctor", "train", "completion", "version"}},
		{"a command's prefix", []string{"pro"}, []string{"profile"}},
		{"a subcommand", []string{"hostlist", "t"}, []string{"tasks-per-node"}},
		{"flags", []string{"env", "-"}, []string{"--format", "-f", "--allocation", "--help", "-h"}},
		{"the app's flags", []string{"--v"}, []string{"--version"}},
		{"a flag's prefix", []string{"sbatch", "--dry"}, []string{"--dry-run"}},
		{"a flag's value", []string{"env", "--format", ""}, nil},
		{"a flag's value after a short name", []string{"env", "-f", "-"}, nil},
		{"after a value", []string{"env", "-f", "json", "--a"}, []string{"--allocation"}},
		{"after an attached value", []string{"env", "--format=json", "--a"}, []string{"--allocation"}},
		{"bash splits at =", []string{"env", "--format", "=", "json", "--a"}, []string{"--allocation"}},
		{"the value after bash's =", []string{"env", "--format", "=", ""}, nil},
		{"after a switch", []string{"sbatch", "--force", "--dry"}, []string{"--dry-run"}},
		{"after --", []string{"sbatch", "-N", "1", "--", ""}, nil},
		{"flags after --", []string{"run", "-n", "1", "--", "sh", "--"}, nil},
		{"-- itself is a prefix", []string{"hostlist", "expand", "--"}, []string{"--format", "--help"}},
		{"after an argument", []string{"exec", "python3", "-"}, nil},
		{"an unknown command", []string{"nosuch", "-"}, nil},
		{"an unknown subcommand", []string{"profile", "nosuch", ""}, nil},
		{"an unknown flag", []string{"env", "--nosuch", "--form"}, []string{"--format"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, clitree.Completions(app, tc.words)); diff != "" {
				t.Errorf("clitree.Completions(%q) (-want +got):\n%s", tc.words, diff)
			}
		})
	}
}

// TestCompletionRunsNoAction asks Main to complete lines whose action, run,
// would write a file: urfave/cli ran it when the words held a "--".
func TestCompletionRunsNoAction(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{
		{"batchkit", "run", "-n", "1", "--", "sh", "-c", "touch ran", "", clitree.CompletionFlag},
		{"batchkit", "run", "-n", "1", "--", "sh", "-c", "touch ran", "--", clitree.CompletionFlag},
		{"batchkit", "sbatch", "-N", "1", "--write", "ran", "--", "true", "", clitree.CompletionFlag},
		{"batchkit", "sbatch", "--write", "ran", "-N", "1", "--", "true", "--", clitree.CompletionFlag},
	} {
		var stdout, stderr bytes.Buffer
		if code := Main(args, &stdout, &stderr); code != 0 || stdout.Len() != 0 || stderr.Len() != 0 {
			t.Errorf("Main(%q) = %d, stdout %q, stderr %q; want 0 and no output", args, code, stdout.String(), stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("completion ran an action: file 'ran' exists")
	}
}
