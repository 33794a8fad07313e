package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// failFastScripts are the ranks' programs (issue 22 §2): rank 1 fails,
// or dies by a signal, or exits 0 early, while ranks 0 and 2 sleep. Output
// goes to stderr, which runExit returns.
var failFastScripts = []struct {
	name, script string
	fails        bool
	status       string // what the status shows as, for the MPICH watcher's line
}{
	{"exit 3", `if [ "$RANK" = 1 ]; then sleep 1; echo "rank 1 last words" >&2; exit 3; fi; exec sleep 300`, true, "3"},
	{"SIGKILL", `if [ "$RANK" = 1 ]; then sleep 1; echo "rank 1 last words" >&2; kill -9 $$; fi; exec sleep 300`, true, "137"},
	{"exit 0 early", `if [ "$RANK" = 1 ]; then exit 0; fi; sleep 3; echo "rank $RANK done" >&2`, false, ""},
}

// A failing rank ends the whole job within seconds, non-zero, its last
// output and status shown; a rank exiting 0 early stops nobody. MPICH's
// Hydra needs batchkit exec's watcher (launch/failfast); Open MPI and
// batchkit run stop the job themselves and are here for comparison.
func TestFailFast(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real MPI launchers")
	}
	launchers := []struct {
		name, tool string
		cluster    bool
		argv       []string
		shows      string // the failing rank's status, %s its value
		watched    bool   // batchkit exec's watcher stops the others
		intel      bool   // Intel MPI's wheels, with the venv active (needIntel)
	}{
		{"mpich", "mpirun.mpich", false, []string{bin, "mpirun", "--flavor", "mpich", "-n", "3", "--"},
			`batchkit: rank 1 exited with status %s; stopping the other ranks`, true, false},
		// Intel MPI's Hydra lets the others run on too (measured: 30 s
		// sleeps ran out after rank 1's exit 3 or SIGKILL): watched.
		{"intelmpi", "", false, []string{bin, "mpirun", "--profile", "intel-pip", "-n", "3", "--"},
			`batchkit: rank 1 exited with status %s; stopping the other ranks`, true, true},
		{"openmpi", "mpirun.openmpi", false, []string{bin, "mpirun", "--flavor", "openmpi", "-n", "3", "--allow-run-as-root", "--oversubscribe", "--"},
			`(?i)rank 1|exit(ed)? .*code|signal`, false, false},
		{"batchkit run", "", false, []string{bin, "run", "-n", "3", "--"}, `rank 1 (exited with code|was killed by)`, false, false},
		// srun with SLURM_KILL_BAD_EXIT=1, which batchkit sets: srun stops
		// the step, and batchkit exec, seeing the variable, does not watch.
		{"srun", "srun", true, []string{bin, "mpirun", "--launcher", "srun", "--flavor", "mpich", "-n", "3", "--"},
			`task 1: (Exited with exit code %s|Killed)`, false, false},
		// A user's own srun, without --kill-on-bad-exit: batchkit exec's watcher.
		{"plain srun", "srun", true, []string{"srun", "-N2", "-n3", "--time=5", bin, "exec", "--"},
			`batchkit: rank 1 exited with status %s; stopping the other ranks`, true, false},
	}
	for _, l := range launchers {
		for _, s := range failFastScripts {
			t.Run(l.name+"/"+s.name, func(t *testing.T) {
				if l.tool != "" {
					needTool(t, l.tool)
				}
				if l.cluster {
					needCluster(t)
				}
				env := localEnv()
				if l.cluster {
					env = os.Environ()
				} else {
					// Side by side: mostly sleeps, and no queue. The cluster's
					// run one by one, their bound counting the allocation.
					t.Parallel()
				}
				if l.intel {
					env = intelEnv(env, "VIRTUAL_ENV="+needIntel(t))
				}
				code, took, out := runExit(t, env, append(append([]string{}, l.argv...), "sh", "-c", s.script))
				t.Logf("exit %d after %v", code, took.Round(10*time.Millisecond))
				checkFailFast(t, code, took, out, s.fails, regexp.MustCompile(sprintfStatus(l.shows, s.status)))
				if watched := strings.Contains(out, "stopping the other ranks"); s.fails && watched != l.watched {
					t.Errorf("batchkit exec's watcher stopped the others: %v, want %v\n%s", watched, l.watched, out)
				}
			})
		}
	}
}

// sprintfStatus puts status into a pattern that may not mention it.
func sprintfStatus(pattern, status string) string {
	return regexp.MustCompile(`%s`).ReplaceAllLiteralString(pattern, regexp.QuoteMeta(status))
}

func checkFailFast(t *testing.T, code int, took time.Duration, out string, fails bool, shows *regexp.Regexp) {
	t.Helper()
	if !fails {
		if code != 0 || took < 3*time.Second {
			t.Errorf("exit %d after %v, want 0 after the others' 3 s\n%s", code, took, out)
		}
		for _, want := range []string{"rank 0 done", "rank 2 done"} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		return
	}
	if code == 0 || took > 10*time.Second {
		t.Errorf("exit %d after %v, want non-zero within 10 s\n%s", code, took, out)
	}
	if !regexp.MustCompile("rank 1 last words").MatchString(out) || !shows.MatchString(out) {
		t.Errorf("output lacks rank 1's last words or %q:\n%s", shows, out)
	}
}

// BATCHKIT_FAIL_FAST=0 gives Hydra its own behaviour back: the others run
// on to their end.
func TestFailFastOff(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real MPI launchers")
	}
	needTool(t, "mpirun.mpich")
	env := append(localEnv(), "BATCHKIT_FAIL_FAST=0")
	code, took, out := runExit(t, env, []string{bin, "mpirun", "--flavor", "mpich", "-n", "3", "--", "sh", "-c",
		`if [ "$RANK" = 1 ]; then exit 3; fi; sleep 3`})
	if code == 0 || took < 3*time.Second || regexp.MustCompile("stopping").MatchString(out) {
		t.Errorf("exit %d after %v, want non-zero after the others' 3 s, nobody stopped\n%s", code, took, out)
	}
}

// batchkit mpirun --no-fail-fast is the flag for the same: every rank gets
// BATCHKIT_FAIL_FAST=0 by -genv, over a value the user exported, and Hydra
// lets the others run to their end (4 s) after rank 1 exits 3 at 1 s; the
// job still exits non-zero. Without the flag TestFailFast's mpich cases
// stop within seconds.
func TestFailFastNoFailFastFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real MPI launchers")
	}
	needTool(t, "mpirun.mpich")
	for _, exported := range []string{"", "1"} {
		t.Run("BATCHKIT_FAIL_FAST="+exported, func(t *testing.T) {
			env := slices.DeleteFunc(localEnv(), func(kv string) bool { return strings.HasPrefix(kv, "BATCHKIT_FAIL_FAST=") })
			if exported != "" {
				env = append(env, "BATCHKIT_FAIL_FAST="+exported)
			}
			code, took, out := runExit(t, env, []string{bin, "mpirun", "--flavor", "mpich", "--no-fail-fast", "-n", "3", "--", "sh", "-c",
				`if [ "$RANK" = 1 ]; then sleep 1; echo "rank 1 last words" >&2; exit 3; fi; sleep 4; echo "rank $RANK done" >&2`})
			t.Logf("exit %d after %v", code, took.Round(10*time.Millisecond))
			if code == 0 || took < 4*time.Second || regexp.MustCompile("stopping").MatchString(out) {
				t.Errorf("exit %d after %v, want non-zero after the others' 4 s, nobody stopped\n%s", code, took, out)
			}
			for _, want := range []string{"rank 1 last words", "rank 0 done", "rank 2 done"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// Inside a batch script on the two-node cluster, MPICH's ranks derive the
// job token from the job id, as the TCP collective does, and still stop
// each other.
func TestFailFastSbatchMPICH(t *testing.T) {
	code, took, stderr, b := submitMPICH(t, nil, failFastScripts[0].script)
	if code == 0 || took > 40*time.Second {
		t.Errorf("exit %d after %v, want non-zero well before the ranks' 300 s\n%s\njob output:\n%s", code, took, stderr, b)
	}
	if want := "batchkit: rank 1 exited with status 3; stopping the other ranks"; !regexp.MustCompile(regexp.QuoteMeta(want)).Match(b) {
		t.Errorf("job output lacks %q:\n%s", want, b)
	}
}

// sbatch --no-fail-fast puts BATCHKIT_FAIL_FAST=0 on the launch line: the
// job's MPICH ranks run to their end (4 s) after rank 1 exits 3, and the
// job exits non-zero.
func TestFailFastSbatchNoFailFastFlag(t *testing.T) {
	code, took, stderr, b := submitMPICH(t, []string{"--no-fail-fast"},
		`if [ "$RANK" = 1 ]; then sleep 1; exit 3; fi; sleep 4; echo "rank $RANK done" >&2`)
	if code == 0 || took < 4*time.Second || regexp.MustCompile("stopping").Match(b) {
		t.Errorf("exit %d after %v, want non-zero after the others' 4 s, nobody stopped\n%s\njob output:\n%s", code, took, stderr, b)
	}
	for _, want := range []string{"rank 0 done", "rank 2 done", "rank 3 done"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("job output lacks %q:\n%s", want, b)
		}
	}
}

// submitMPICH runs script on 4 MPICH ranks on the two-node cluster
// (batchkit sbatch --wait, with flags) and returns the exit code, the time
// from submission, sbatch's stderr and the job's output.
func submitMPICH(t *testing.T, flags []string, script string) (int, time.Duration, string, []byte) {
	t.Helper()
	needCluster(t)
	needTool(t, "mpirun.mpich")
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	out := filepath.Join(dir, "job.out")
	argv := append([]string{bin, "sbatch", "--wait", "-N", "2", "--ntasks-per-node", "2", "--flavor", "mpich", "--launcher", "mpirun", "-o", out}, flags...)
	start := time.Now()
	code, _, stderr := runExit(t, os.Environ(), append(argv, "--", "sh", "-c", script))
	took := time.Since(start)
	b, _ := os.ReadFile(out)
	t.Logf("exit %d after %v (submission and scheduling included)", code, took.Round(10*time.Millisecond))
	return code, took, stderr, b
}

// torchFailing is a PyTorch program whose rank 1 raises while the others
// wait for it in init_process_group (gloo, env://): without fail-fast they
// would wait there for the default 30 minutes.
const torchFailing = `import os, time, torch.distributed as dist
if os.environ["RANK"] == "1":
    time.sleep(1)
    raise RuntimeError("rank 1 last words")
dist.init_process_group("gloo", init_method="env://")
`

// The case under every launcher: a Python rank raises while the
// others wait in init_process_group, and the job ends within seconds,
// non-zero, with rank 1's traceback. Debian's python3-torch, which another
// python3 earlier on PATH may not see. The cluster's jobs run side by side;
// their bound includes submission and sbatch --wait's polling.
func TestFailFastTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real launchers")
	}
	if exec.Command("/usr/bin/python3", "-c", "import torch.distributed").Run() != nil {
		requireOrSkip(t, "/usr/bin/python3 cannot import torch (apt-get install python3-torch)")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	prog := filepath.Join(dir, "failing.py")
	if err := os.WriteFile(prog, []byte(torchFailing), 0o644); err != nil {
		t.Fatal(err)
	}
	py := []string{"--", "/usr/bin/python3", prog}
	// Two cluster launches at a time: their bound counts their time in the
	// queue, and two fit the cluster side by side.
	twoJobs := make(gate, 2)
	for _, tc := range []struct {
		name, tool string
		cluster    bool
		argv       []string // for sbatch, --wait and -o are added
		within     time.Duration
	}{
		{"batchkit run", "", false, []string{"run", "-n", "3"}, 20 * time.Second},
		{"mpirun openmpi", "mpirun.openmpi", false, []string{"mpirun", "--flavor", "openmpi", "-n", "3", "--allow-run-as-root", "--oversubscribe"}, 20 * time.Second},
		{"mpirun mpich", "mpirun.mpich", false, []string{"mpirun", "--flavor", "mpich", "-n", "3"}, 20 * time.Second},
		{"plain srun", "srun", true, nil, 30 * time.Second},
		{"sbatch openmpi", "mpirun.openmpi", true, []string{"sbatch", "-N", "2", "--ntasks-per-node", "2"}, 55 * time.Second},
		{"sbatch srun pmix", "", true, []string{"sbatch", "--launcher", "srun", "-N", "2", "--ntasks-per-node", "2"}, 55 * time.Second},
		{"sbatch mpich", "mpirun.mpich", true, []string{"sbatch", "--flavor", "mpich", "--launcher", "mpirun", "-N", "2", "--ntasks-per-node", "2"}, 55 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tool != "" {
				needTool(t, tc.tool)
			}
			env := localEnv()
			if tc.cluster {
				needCluster(t)
				twoJobs.enter(t)
				env = os.Environ()
			}
			argv := append([]string{bin}, tc.argv...)
			out := ""
			switch {
			case tc.argv == nil:
				argv = []string{"srun", "-N2", "-n3", "--time=5", bin, "exec"}
			case tc.argv[0] == "sbatch":
				jobDir := t.TempDir()
				os.Chmod(jobDir, 0o777)
				out = filepath.Join(jobDir, "job.out")
				argv = append(argv, "--wait", "-o", out)
			}
			code, took, stderr := runExit(t, env, append(argv, py...))
			if out != "" {
				b, _ := os.ReadFile(out)
				stderr += "\n--- job output\n" + string(b)
			}
			t.Logf("exit %d after %v", code, took.Round(10*time.Millisecond))
			if code == 0 || took > tc.within {
				t.Errorf("exit %d after %v, want non-zero within %v\n%s", code, took, tc.within, stderr)
			}
			if !strings.Contains(stderr, "RuntimeError: rank 1 last words") {
				t.Errorf("output lacks rank 1's traceback:\n%s", stderr)
			}
		})
	}
}
