package integration

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The tools a completion could reach if it ran a command's action: each
// fake records its name in the log instead of doing anything.
var fakeTools = []string{"sbatch", "srun", "salloc", "scancel", "scontrol", "sinfo", "squeue",
	"mpirun", "mpiexec", "mpiexec.hydra", "mpirun.openmpi", "mpirun.mpich", "python3", "torchrun", "module"}

// completionShell drives batchkit's generated completion script in a real
// shell, as the shell does on TAB: the words typed so far, the cursor in
// the last one, and returns the candidates it offers.
type completionShell struct {
	name   string
	script string // the generated completion script
	driver string // shell code: source $1, set the words from the rest, complete, print
}

var completionShells = []completionShell{
	{name: "bash", driver: `source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
_batchkit_complete
printf '%s\n' "${COMPREPLY[@]}"`},
	// compadd, _files and compdef belong to zsh's completion system, which
	// runs only in an interactive line editor: stand-ins print what the
	// script asked for.
	{name: "zsh", driver: `compadd() { [[ $1 == -- ]] && shift; print -rl -- "$@"; }
_files() { print -r -- '<files>'; }
compdef() { :; }
source "$1"; shift
words=("$@"); CURRENT=$#
_batchkit`},
	// fish completes a command line given as a string (complete -C), with
	// its real file-name completion, and prints "candidate<TAB>description";
	// $argv[1] is "fish", then the script. An empty last word is a line
	// ending in a blank.
	{name: "fish", driver: `source $argv[2]
set -l words $argv[3..-1]
set -l line (string join ' ' -- (string escape -- $words[1..-2]))' '
if test -n "$words[-1]"
    set line "$line"(string escape -- $words[-1])
end
complete -C "$line" | string replace -r '\t.*' ''
true # string replace's status is 1 when no candidate had a description`},
}

// TestCompletionRunsNothing types TAB at the end of lines for every
// command, hostile ones included (after "--", a program that writes a file,
// a broken profile, an unknown command, a rank that would connect to rank
// 0), in real bash and zsh, and checks that no action ran: no file was
// written, no Slurm or MPI tool was called, no socket reached rank 0.
func TestCompletionRunsNothing(t *testing.T) {
	cpu.enter(t)
	var lines [][]string
	for _, cmd := range [][]string{{"env"}, {"exec"}, {"run", "-n", "1"}, {"sbatch", "-N", "1"},
		{"hostlist", "expand"}, {"hostlist", "compress"}, {"hostlist", "tasks-per-node"},
		{"profile", "list"}, {"profile", "show"}, {"profile", "explain"}, {"profile", "check"},
		{"mpirun", "-n", "1"}, {"bench"}, {"completion"}, {"nosuch"}} {
		for _, tail := range [][]string{
			{""}, {"-"}, {"--"},
			{"--", "sh", "-c", "touch ran-after-dashes", ""},
			{"--", "sh", "-c", "touch ran-after-dashes", "--"},
			{"sh", "-c", "touch ran-as-argument", ""},
			{"--write", "written.sh", "--force", "--", "true", ""},
			{"--profile", "broken.toml", "-"},
			{"--backend", "tcp", "--", "tr"},
		} {
			lines = append(lines, append(append([]string{bin}, cmd...), tail...))
		}
	}
	lines = append(lines,
		[]string{bin, "sbatch", "-N", "1", "--", "./train.sh", ""},
		[]string{bin, "sbatch", "--job-name", "a'b\"c\n$(touch ran-in-value)", ""},
		[]string{bin, "sbatch", "--job-name", "=", "x;touch ran-in-value", "--"},
		[]string{bin, "bench", "--backend", "tcp", "--"},
		[]string{bin, "exec", "--", "sh", "-c", `exec "$0" bench --backend tcp`, bin, ""},
		[]string{bin, "sbatch", "--profile", "nosuch", "--", "true", "--"},
		[]string{bin, "completion", "bash", ""},
	)
	for _, sh := range completionShells {
		t.Run(sh.name, func(t *testing.T) {
			if _, err := exec.LookPath(sh.name); err != nil {
				requireOrSkip(t, sh.name+" not found (scripts/local-cluster.sh up installs it)")
			}
			w := newCompletionWorld(t)
			script := filepath.Join(w.dir, "completion."+sh.name)
			os.WriteFile(script, []byte(run(t, 10*time.Second, bin, "completion", sh.name)), 0o644)
			for _, words := range lines {
				complete(t, sh, script, w.work, w.env, words)
			}
			w.checkNothingRan(t)
		})
	}
}

// completionWorld is where a completion that ran an action would leave a
// trace: fake Slurm and MPI tools that log their calls, a working directory
// to write into, and a listener at rank 0's address.
type completionWorld struct {
	dir, work, log string
	env            []string
	ln             *net.TCPListener
}

func newCompletionWorld(t *testing.T) *completionWorld {
	w := &completionWorld{dir: t.TempDir()}
	tools := filepath.Join(w.dir, "tools")
	w.log = filepath.Join(w.dir, "tools.log")
	w.work = filepath.Join(w.dir, "work")
	os.Mkdir(tools, 0o755)
	os.Mkdir(w.work, 0o755)
	for _, tool := range fakeTools {
		fake := "#!/bin/sh\necho " + tool + " >>" + w.log + "\n"
		if err := os.WriteFile(filepath.Join(tools, tool), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range map[string]string{"train.sh": "#!/bin/sh\n", "broken.toml": "[slurm\nnodes = \n"} {
		os.WriteFile(filepath.Join(w.work, name), []byte(text), 0o644)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.ln = ln.(*net.TCPListener)
	t.Cleanup(func() { ln.Close() })
	// A rank-1 action (bench, exec) would connect to this rank 0.
	port := strconv.Itoa(w.ln.Addr().(*net.TCPAddr).Port)
	w.env = append(os.Environ(), "PATH="+tools+":"+os.Getenv("PATH"),
		"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port,
		"BATCHKIT_JOB_TOKEN=completion-test-token-0123456789abcdef")
	return w
}

func (w *completionWorld) checkNothingRan(t *testing.T) {
	t.Helper()
	if b, err := os.ReadFile(w.log); err == nil {
		t.Errorf("completion ran tools: %q", b)
	}
	entries, _ := os.ReadDir(w.work)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"broken.toml", "train.sh"}, names); diff != "" {
		t.Errorf("completion changed the working directory (-want +got):\n%s", diff)
	}
	w.ln.SetDeadline(time.Now().Add(100 * time.Millisecond))
	if c, err := w.ln.Accept(); err == nil {
		c.Close()
		t.Error("completion connected to rank 0's address")
	}
}

// TestCompletionCandidates checks what TAB offers in every shell: commands,
// flags, a flag's values (profiles, flavors, launchers, backends, formats),
// the commands help shows, and file names after "--", in arguments and in a
// value no candidate fits.
func TestCompletionCandidates(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "train.sh"), nil, 0o644)
	for _, sh := range completionShells {
		if _, err := exec.LookPath(sh.name); err != nil {
			requireOrSkip(t, sh.name+" not found (scripts/local-cluster.sh up installs it)")
		}
		script := filepath.Join(t.TempDir(), "completion."+sh.name)
		os.WriteFile(script, []byte(run(t, 10*time.Second, bin, "completion", sh.name)), 0o644)
		for _, tc := range []struct {
			words []string
			want  []string // the candidates; with files, bash's (zsh asks _files)
			files bool     // the shell completes file names
			some  bool     // want lists some of the candidates
		}{
			{words: []string{"sb"}, want: []string{"sbatch"}},
			{words: []string{"hostlist", "c"}, want: []string{"compress"}},
			{words: []string{"sbatch", "--job"}, want: []string{"--job-name"}},
			{words: []string{"env", "--format", "=", "json", "--al"}, want: []string{"--allocation"}},
			{words: []string{"sbatch", "-N", "1", "--", "tr"}, want: []string{"train.sh"}, files: true},
			{words: []string{"run", "-n", "2", "--", "./x", "--he"}, want: nil, files: true},
			{words: []string{"sbatch", "--job-name", "tr"}, want: []string{"train.sh"}, files: true},
			{words: []string{"sbatch", "--profile", "tr"}, want: []string{"train.sh"}, files: true}, // a profile's file
			{words: []string{"sbatch", "--profile", "intel-"}, want: []string{"intel-oneccl", "intel-pip"}},
			{words: []string{"mpirun", "--flavor", "m"}, want: []string{"mpich", "mvapich"}},
			{words: []string{"mpirun", "--launcher", "s"}, want: []string{"srun"}},
			{words: []string{"train", "--backend", "t"}, want: []string{"tcp"}},
			{words: []string{"env", "--format", "to"}, want: []string{"torchrun"}},
			{words: []string{"env", "--format", "=", "to"}, want: []string{"torchrun"}},
			{words: []string{"env", "--format=to"}, want: []string{"--format=torchrun"}},
			{words: []string{"help", "hostl"}, want: []string{"hostlist"}},
			{words: []string{""}, want: []string{"env", "exec", "run", "sbatch", "hostlist", "profile", "mpirun", "bench", "completion"}, some: true},
		} {
			got := complete(t, sh, script, dir, os.Environ(), append([]string{bin}, tc.words...))
			want := tc.want
			if tc.files && sh.name == "zsh" {
				want = []string{"<files>"}
			}
			if tc.some {
				got = slices.DeleteFunc(got, func(s string) bool { return !slices.Contains(want, s) })
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: batchkit %s<TAB> (-want +got):\n%s", sh.name, strings.Join(tc.words, " "), diff)
			}
		}
	}
}

// complete runs one TAB in sh and returns the candidates.
func complete(t *testing.T, sh completionShell, script, dir string, env, words []string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sh.name, append([]string{"-c", sh.driver, sh.name, script}, words...)...)
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 2 * time.Second // a leftover child must not hold the output open
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s completing %q: %v\n%s", sh.name, words, err, out)
		return nil
	}
	var got []string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if l != "" {
			got = append(got, l)
		}
	}
	return got
}
