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
	t.Setenv("BATCHKIT_PROFILE_PATH", "")
	app := newApp(io.Discard, io.Discard)
	for _, tc := range []struct {
		name  string
		words []string
		want  []string
	}{
		{"nothing typed", nil, []string{"env", "exec", "run", "sbatch", "hostlist", "profile", "mpirun", "envsetup", "bench", "doctor", "train", "completion", "version", "help"}},
		{"a command's prefix", []string{"pro"}, []string{"profile"}},
		{"a subcommand", []string{"hostlist", "t"}, []string{"tasks-per-node"}},
		{"flags", []string{"env", "-"}, []string{"--format", "-f", "--allocation", "--help", "-h"}},
		{"the app's flags", []string{"--v"}, []string{"--version"}},
		{"a flag's prefix", []string{"sbatch", "--dry"}, []string{"--dry-run"}},
		{"a flag without values", []string{"sbatch", "--job-name", ""}, nil},
		{"a flag's value after a short name", []string{"env", "-f", "-"}, nil},
		{"after a value", []string{"env", "-f", "json", "--a"}, []string{"--allocation"}},
		{"after an attached value", []string{"env", "--format=json", "--a"}, []string{"--allocation"}},
		{"bash splits at =", []string{"env", "--format", "=", "json", "--a"}, []string{"--allocation"}},
		{"the value after bash's =", []string{"env", "--format", "=", ""}, []string{"json", "shell", "text", "torchrun"}},
		{"after a switch", []string{"sbatch", "--force", "--dry"}, []string{"--dry-run"}},
		{"after --", []string{"sbatch", "-N", "1", "--", ""}, nil},
		{"flags after --", []string{"run", "-n", "1", "--", "sh", "--"}, nil},
		{"-- itself is a prefix", []string{"hostlist", "expand", "--"}, []string{"--format", "--help"}},
		{"after an argument", []string{"exec", "python3", "-"}, nil},
		{"an unknown command", []string{"nosuch", "-"}, nil},
		{"an unknown subcommand", []string{"profile", "nosuch", ""}, nil},
		{"an unknown flag", []string{"env", "--nosuch", "--form"}, []string{"--format"}},
		{"an argument is no command", []string{"exec", ""}, nil},

		// A flag's values, from the rows the command parses it with.
		{"env's formats", []string{"env", "--format", ""}, []string{"json", "shell", "text", "torchrun"}},
		{"envsetup's formats", []string{"envsetup", "-f", ""}, []string{"json", "shell"}},
		{"text or json", []string{"profile", "list", "--format", ""}, []string{"text", "json"}},
		{"bench's formats", []string{"bench", "--format", "j"}, []string{"json"}},
		{"a value's prefix", []string{"env", "--format", "t"}, []string{"text", "torchrun"}},
		{"after bash's =", []string{"env", "--format", "=", "t"}, []string{"text", "torchrun"}},
		{"TAB right after bash's =", []string{"env", "--format", "="}, []string{"json", "shell", "text", "torchrun"}},
		{"--flag=value as one word", []string{"mpirun", "--flavor=m"}, []string{"--flavor=mpich", "--flavor=mvapich"}},
		{"flavors", []string{"mpirun", "--flavor", ""}, []string{"openmpi", "mpich", "intelmpi", "mvapich"}},
		{"sbatch's flavors", []string{"sbatch", "-N", "2", "--flavor", "i"}, []string{"intelmpi"}},
		{"launchers", []string{"sbatch", "--launcher", ""}, []string{"mpirun", "mpiexec", "srun"}},
		{"backends", []string{"train", "--backend", ""}, []string{"auto", "mpi", "ccl", "tcp"}},
		{"bench's backends", []string{"bench", "--backend", "t"}, []string{"tcp"}},
		{"no value fits: files", []string{"mpirun", "--flavor", "x"}, nil},
		{"a switch has no values", []string{"sbatch", "--wait", ""}, nil},
		{"after a value, flags again", []string{"mpirun", "--flavor", "mpich", "--dry"}, []string{"--dry-run"}},

		// help NAME: the commands it can show.
		{"help", []string{"help", ""}, []string{"env", "exec", "run", "sbatch", "hostlist", "profile", "mpirun", "envsetup", "bench", "doctor", "train", "completion", "version"}},
		{"help's prefix", []string{"help", "pro"}, []string{"profile"}},
		{"help's alias", []string{"h", "hostl"}, []string{"hostlist"}},
		{"a group's help", []string{"profile", "help", "e"}, []string{"explain"}},
		{"help takes one", []string{"help", "env", ""}, nil},
		{"a group's commands and help", []string{"hostlist", ""}, []string{"expand", "compress", "tasks-per-node", "help"}},
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

// --profile offers the names on the profile search path, the user's too,
// and leaves a path to the shell's file names.
func TestCompleteProfiles(t *testing.T) {
	dir, conf := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dir, "mysite.toml"), []byte("[slurm\n"), 0o644) // broken: never read
	os.MkdirAll(filepath.Join(conf, "batchkit", "profiles"), 0o755)
	os.WriteFile(filepath.Join(conf, "batchkit", "profiles", "mine.toml"), nil, 0o644)
	t.Setenv("BATCHKIT_PROFILE_PATH", dir)
	t.Setenv("XDG_CONFIG_HOME", conf)
	app := newApp(io.Discard, io.Discard)
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"sbatch", "--profile", "intel"}, []string{"intel-oneccl", "intel-pip"}},
		{[]string{"doctor", "--profile", "m"}, []string{"mine", "mpich", "mysite"}},
		{[]string{"mpirun", "--profile=my"}, []string{"--profile=mysite"}},
		{[]string{"run", "--profile", "lo"}, []string{"local"}},
		{[]string{"exec", "--profile", "./"}, nil},
	} {
		if diff := cmp.Diff(tc.want, clitree.Completions(app, tc.words)); diff != "" {
			t.Errorf("clitree.Completions(%q) (-want +got):\n%s", tc.words, diff)
		}
	}
}
