package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/internal/clitree"
	"github.com/batchkit/batchkit/internal/mdtable"
)

// profileDefaults is what each command uses without --profile: doc is its
// cell in docs/reference/profiles.md, says the phrase its --profile help
// (or, for profile show, its group's description) ends with, and probe the
// arguments of a run that would load that profile (nil: not run here:
// doctor runs its checks, exec replaces the test process).
var profileDefaults = []struct {
	doc   string
	cmd   []string
	says  string
	probe []string
}{
	{"`sbatch`", []string{"sbatch"}, profileOrLocal, []string{"--dry-run", "-N", "1", "--", "true"}},
	{"`doctor`", []string{"doctor"}, profileOrLocal, nil},
	{"`profile show`, `profile explain` (without NAME)", []string{"profile", "show"}, profileOrLocal, []string{}},
	{"`mpirun`", []string{"mpirun"}, profileOrDetect, []string{"--dry-run", "--flavor", "mpich", "--mpirun", "mpiexec.hydra", "-n", "1", "--", "true"}},
	{"`envsetup`", []string{"envsetup"}, profileOrSource, []string{}},
	{"`run`", []string{"run"}, profileOnlyFlag, []string{"-n", "1", "--", "true"}},
	{"`exec`", []string{"exec"}, profileOnlyFlag, nil},
}

// TestProfileDefaults keeps one truth about the default profile (issue 30
// item 19: README and man page said local, mpirun --help "none"): each
// command's help says what it does without --profile, the table in
// docs/reference/profiles.md says the same, and the commands do it: one
// that reads $BATCHKIT_PROFILE fails on a profile of that name that does
// not exist, one that falls back to local fails on a broken local.toml
// early on the search path, and the others run.
func TestProfileDefaults(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	for _, r := range profileDefaults {
		if got := profileHelp(app, r.cmd); !strings.Contains(got, strings.TrimPrefix(r.says, "default: ")) {
			t.Errorf("batchkit %s: the help says %q, want %q", strings.Join(r.cmd, " "), got, r.says)
		}
	}

	doc, err := os.ReadFile("../../docs/reference/profiles.md")
	if err != nil {
		t.Fatal(err)
	}
	table, err := mdtable.Under(string(doc), "## Which profile a command uses", 2)
	if err != nil {
		t.Fatal(err)
	}
	var want, got [][2]string
	for _, r := range profileDefaults {
		want = append(want, [2]string{r.doc, strings.TrimPrefix(r.says, "default: ")})
	}
	for _, row := range table {
		got = append(got, [2]string{row[0], strings.ReplaceAll(row[1], "`", "")})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/reference/profiles.md, \"Which profile a command uses\" (-the commands' help +the doc):\n%s", diff)
	}

	broken := t.TempDir()
	os.WriteFile(filepath.Join(broken, "local.toml"), []byte("[slurm\n"), 0o644)
	for _, r := range profileDefaults {
		if r.probe == nil {
			continue
		}
		args := append(append([]string{"batchkit"}, r.cmd...), r.probe...)
		t.Run(strings.Join(r.cmd, " "), func(t *testing.T) {
			t.Setenv("BATCHKIT_PROFILE", "nosuch-in-env")
			t.Setenv("BATCHKIT_PROFILE_PATH", "")
			readsEnv := strings.HasPrefix(r.says, "default: $BATCHKIT_PROFILE")
			probeProfile(t, args, "nosuch-in-env", readsEnv)

			t.Setenv("BATCHKIT_PROFILE", "")
			t.Setenv("BATCHKIT_PROFILE_PATH", broken)
			probeProfile(t, args, "local.toml", r.says == profileOrLocal)
		})
	}
}

// profileHelp is the --profile help of the command at path, or the
// description of its group when it has no such flag (profile show NAME).
func profileHelp(app *cli.App, path []string) string {
	cmds, parent := app.Commands, (*cli.Command)(nil)
	var c *cli.Command
	for _, name := range path {
		parent, c = c, clitree.FindCommand(cmds, name)
		cmds = c.Subcommands
	}
	for _, f := range c.Flags {
		if d, ok := f.(cli.DocGenerationFlag); ok && f.Names()[0] == "profile" {
			return d.GetUsage()
		}
	}
	return strings.Join(strings.Fields(parent.Description), " ")
}

// probeProfile runs args and checks that their output names profile when
// loads says it loads it, and that they run (exit 0) when not.
func probeProfile(t *testing.T, args []string, profile string, loads bool) {
	t.Helper()
	var out bytes.Buffer
	code := Main(args, &out, &out)
	switch named := strings.Contains(out.String(), profile); {
	case loads && !named:
		t.Errorf("%q: exit %d, output %q: does not load %s", args, code, out.String(), profile)
	case !loads && (named || code != 0):
		t.Errorf("%q: exit %d, output %q: want exit 0, without loading %s", args, code, out.String(), profile)
	}
}
