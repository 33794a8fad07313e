package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// stopLaunchers are the launchers batchkit sbatch writes a launch line for
// on this cluster: srun (the local profile's Open MPI over pmix), Open MPI's
// mpirun, MPICH's Hydra mpirun and Intel MPI's (the intel-pip profile: the
// wheels' mpirun script and Hydra, -bootstrap slurm).
var stopLaunchers = []struct {
	name, tool string
	args       []string
	intel      bool // the Intel stack's venv active at submission (tool: "")
}{
	{"srun", "srun", []string{"--launcher", "srun"}, false},
	{"openmpi", "mpirun.openmpi", nil, false},
	{"mpich", "mpirun.mpich", []string{"--flavor", "mpich", "--launcher", "mpirun", "--mpirun", "mpirun.mpich"}, false},
	{"intelmpi", "", []string{"--profile", "intel-pip"}, true},
}

// stopCase is one job of TestSbatchStop and, once it has ended, what
// became of it.
type stopCase struct {
	launcher, how string
	args          []string // batchkit sbatch's launcher flags
	env           []string // batchkit sbatch's environment; nil: the test's
	skip          string   // why it does not run here

	dir, ckpt, out string
	id             string
	state          string
	restarts       int
	log            string
	signalled      time.Duration // after the submission (0: never)
	took           time.Duration // from the submission to the job's end
	err            error
}

// How a job is stopped: scancel's arguments (nil: the time limit).
var stopHow = map[string][]string{
	"time limit": nil,
	"scancel":    {},
	// The preemption signal to the job's steps, to every process of the
	// job, or to the batch shell alone.
	"USR1":         {"--signal=USR1"},
	"USR1 --full":  {"--signal=USR1", "--full"},
	"USR1 --batch": {"--signal=USR1", "--batch"},
}

// A job of batchkit sbatch --requeue running batchkit train, under every
// launcher, ends for good on a plain scancel and on its time limit
// (Restarts=0: SIGTERM is never a preemption, though srun's ranks get a
// SIGUSR1 from the batch script too and used to exit 75 and requeue the
// job for ever; at the time limit the ranks still checkpoint). Signalled
// with SIGUSR1 mid-run, however Slurm sends it, it checkpoints, requeues
// itself once, runs again and resumes: it ends with the weights of an
// uninterrupted run, and its output file keeps both runs, each from its
// first line. (MPICH's Hydra takes only the plain scancel --signal=USR1
// here: a SIGUSR1 passed on to it can cost the ranks' exit code,
// docs/reference/train.md. Intel MPI's takes all three, through the batch
// script's shield: docs/intel-wheels.md, "Signals".)
// The time limit takes its minute and up to 30 s more, so all the jobs run
// at once, sharing the CPUs (--oversubscribe), the time-limited ones
// niced: the test takes about as long as a time-limited job.
func TestSbatchStop(t *testing.T) {
	needCluster(t)
	needTool(t, "scontrol")
	var cases []*stopCase
	for _, how := range []string{"time limit", "scancel", "USR1", "USR1 --full", "USR1 --batch"} {
		for _, l := range stopLaunchers {
			if strings.HasPrefix(how, "USR1 --") && l.name == "mpich" {
				continue
			}
			c := &stopCase{launcher: l.name, how: how, args: l.args}
			if l.intel {
				prefix, why := intelStack()
				c.skip, c.env = why, intelEnv(os.Environ(), "VIRTUAL_ENV="+prefix)
			} else if _, err := exec.LookPath(l.tool); err != nil {
				c.skip = l.tool + " not found"
			}
			cases = append(cases, c)
		}
	}
	t.Cleanup(func() {
		for _, c := range cases {
			if c.id != "" {
				exec.Command("scancel", c.id).Run() // a no-op once it is done
			}
		}
	})
	var wg sync.WaitGroup
	var want trainSummary // an uninterrupted run's
	var wantErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		want, wantErr = uninterruptedStopTrain(t.TempDir())
	}()
	for _, c := range cases {
		if c.skip != "" {
			continue
		}
		c.dir = t.TempDir()
		os.Chmod(c.dir, 0o777)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.err = c.run()
		}()
	}
	wg.Wait()
	if wantErr != nil {
		t.Fatal(wantErr)
	}
	for _, c := range cases {
		t.Run(c.launcher+"/"+c.how, func(t *testing.T) {
			if c.skip != "" {
				requireOrSkip(t, c.skip)
			}
			if c.err != nil {
				t.Fatalf("%v\njob output:\n%s", c.err, tail(c.log, 40))
			}
			signalled := "never signalled"
			if c.signalled > 0 {
				signalled = fmt.Sprintf("signalled %.1f s after its submission", c.signalled.Seconds())
			}
			t.Logf("job %s: %s after %d restarts; %s, ended after %.1f s", c.id, c.state, c.restarts, signalled, c.took.Seconds())
			c.check(t, want)
		})
	}
}

// stopTrain is the training of the USR1 jobs: 2250 steps, ~2 s alone,
// checkpointed every 50. The others train for ever, on a smaller model.
var stopTrain = []string{"--hidden", "128,128", "--batch-size", "8", "--epochs", "25", "--checkpoint-every", "50"}

// uninterruptedStopTrain is stopTrain on 2 ranks of batchkit run, never
// stopped, checkpointing in dir.
func uninterruptedStopTrain(dir string) (trainSummary, error) {
	argv := append([]string{"run", "-n", "2", "--", bin, "train", "--format", "json", "--checkpoint-dir", dir}, stopTrain...)
	out, err := exec.Command(bin, argv...).Output()
	if err != nil {
		return trainSummary{}, fmt.Errorf("batchkit %s: %v", strings.Join(argv, " "), err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if js, ok := strings.CutPrefix(l, "[0] {"); ok {
			var s trainSummary
			return s, json.Unmarshal([]byte("{"+js), &s)
		}
	}
	return trainSummary{}, fmt.Errorf("no summary from rank 0 of the uninterrupted run:\n%s", out)
}

// run submits c's job, stops it as c.how says and waits for its end. It
// runs on a goroutine of its own: errors are returned, not reported.
func (c *stopCase) run() error {
	c.ckpt = filepath.Join(c.dir, "ckpt")
	c.out = filepath.Join(c.dir, "job.out")
	args := append([]string{"sbatch", "--requeue", "-N", "2", "--ntasks-per-node", "1", "-o", c.out, "--sbatch-arg=--oversubscribe"}, c.args...)
	train := append([]string{bin, "train", "--format", "json", "--checkpoint-dir", c.ckpt}, stopTrain...)
	forever := []string{bin, "train", "--format", "json", "--checkpoint-dir", c.ckpt, "--hidden", "16", "--epochs", "1000000000"}
	switch c.how {
	case "scancel":
		train = append(forever, "--checkpoint-every", "50")
	case "time limit":
		// Niced, to leave the CPUs to the other jobs for the minute; it
		// checkpoints only when stopped: one there is the time limit's.
		args = append(args, "-t", "1")
		train = append(append([]string{"nice", "-n", "19"}, forever...), "--checkpoint-every", "0", "--check-every", "0")
	}
	defer func() {
		b, _ := os.ReadFile(c.out)
		c.log = string(b)
	}()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, append(append(args, "--"), train...)...)
	cmd.Env, cmd.Stdout, cmd.Stderr = c.env, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("batchkit %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	c.id = strings.TrimSpace(stdout.String())
	submitted := time.Now()
	defer func() { c.took = time.Since(submitted) }()
	if signal := stopHow[c.how]; signal != nil {
		if err := waitCheckpointErr(c.ckpt, 50, 2*time.Minute); err != nil {
			return err
		}
		if out, err := exec.Command("scancel", append(signal, c.id)...).CombinedOutput(); err != nil {
			return fmt.Errorf("scancel %s %s: %v: %s", strings.Join(signal, " "), c.id, err, out)
		}
		c.signalled = time.Since(submitted)
	}
	var err error
	c.state, c.restarts, err = waitJobEnd(c.id, strings.HasPrefix(c.how, "USR1"), 3*time.Minute)
	return err
}

// check says what became of c's job; want is an uninterrupted run's
// summary.
func (c *stopCase) check(t *testing.T, want trainSummary) {
	t.Helper()
	if strings.HasPrefix(c.how, "USR1") {
		if c.state != "COMPLETED" || c.restarts != 1 {
			t.Fatalf("job %s: %s after %d restarts, want COMPLETED after 1\njob output:\n%s", c.id, c.state, c.restarts, c.log)
		}
		if err := bothRuns(c.log, c.id, c.ckpt); err != nil {
			t.Error(err)
		}
		got := lastSummary(t, c.log)
		if got.ResumedFromStep < 50 || got.ResumedFromStep >= want.Steps {
			t.Errorf("resumed from step %d, want a step from 50 on, before %d", got.ResumedFromStep, want.Steps)
		}
		if got.WeightsSHA256 != want.WeightsSHA256 || got.Steps != want.Steps || got.WorldSize != 2 {
			t.Errorf("requeued job: %d steps on %d ranks, weights %s; uninterrupted: %d steps, %s\njob output:\n%s",
				got.Steps, got.WorldSize, got.WeightsSHA256, want.Steps, want.WeightsSHA256, c.log)
		}
		return
	}
	wantState := map[string]string{"scancel": "CANCELLED", "time limit": "TIMEOUT"}[c.how]
	if c.state != wantState || c.restarts != 0 {
		t.Fatalf("job %s: %s after %d restarts, want %s after none\njob output:\n%s", c.id, c.state, c.restarts, wantState, tail(c.log, 40))
	}
	for _, bad := range []string{"requeueing job", "run 2", "preempted after step"} {
		if strings.Contains(c.log, bad) {
			t.Errorf("job %s's output has %q:\n%s", c.id, bad, tail(c.log, 40))
		}
	}
	if !strings.Contains(c.log, "batchkit: job "+c.id+", run 1\n") {
		t.Errorf("job %s's output does not say which run it is:\n%s", c.id, tail(c.log, 40))
	}
	if c.how == "time limit" {
		// The ranks had time to checkpoint before Slurm's SIGKILL, except
		// under Open MPI's mpirun, which kills them on SIGTERM (docs/reference/train.md):
		// there it is only reported.
		names, _ := filepath.Glob(filepath.Join(c.ckpt, "ckpt-*.bkpt"))
		switch {
		case len(names) > 0:
			t.Logf("checkpoint at the time limit: %s", filepath.Base(names[len(names)-1]))
		case c.launcher == "openmpi":
			t.Logf("no checkpoint at the time limit (mpirun kills the ranks on SIGTERM)")
		default:
			t.Errorf("no checkpoint in %s: the ranks did not save their work at the time limit\njob output:\n%s", c.ckpt, tail(c.log, 40))
		}
	}
}

// waitCheckpointErr is waitCheckpoint for a goroutine.
func waitCheckpointErr(dir string, step int, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		names, _ := filepath.Glob(filepath.Join(dir, "ckpt-*.bkpt"))
		for _, n := range names {
			var s int
			if _, err := fmt.Sscanf(filepath.Base(n), "ckpt-%d.bkpt", &s); err == nil && s >= step {
				return nil
			}
		}
	}
	return fmt.Errorf("no checkpoint of step %d or later in %s after %v", step, dir, timeout)
}

// tail is the last n lines of s: a time-limited job's output has an epoch
// line every few milliseconds.
func tail(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[... %d lines]\n", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "")
}
