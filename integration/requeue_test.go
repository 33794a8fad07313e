package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// requeueTrain lasts ~5 s under srun, ~10 s under batchkit run: long enough
// to be signalled after a checkpoint and well before its end.
var requeueTrain = []string{"--hidden", "512,512", "--batch-size", "8", "--epochs", "25", "--checkpoint-every", "5"}

// requeueTrainCCL is requeueTrain cut to 4 epochs: oneCCL over libfabric's
// tcp provider takes ~3 s an epoch of it here, the TCP backend a fraction.
var requeueTrainCCL = []string{"--hidden", "512,512", "--batch-size", "8", "--epochs", "4", "--checkpoint-every", "5"}

var uninterrupted sync.Map // strings.Join(train flags) → *uninterruptedResult

type uninterruptedResult struct {
	once sync.Once
	sum  trainSummary
}

// uninterruptedRun is requeueTrain on 2 ranks, never stopped.
func uninterruptedRun(t *testing.T) trainSummary { return uninterruptedOf(t, requeueTrain) }

// uninterruptedOf is the trainer with flags train on 2 ranks over TCP,
// never stopped, once per flags.
func uninterruptedOf(t *testing.T, train []string) trainSummary {
	t.Helper()
	v, _ := uninterrupted.LoadOrStore(strings.Join(train, " "), &uninterruptedResult{})
	u := v.(*uninterruptedResult)
	u.once.Do(func() {
		u.sum = summaryOf(t, run(t, 2*time.Minute, bin, trainArgs(append(slices.Clone(train), "--checkpoint-dir", t.TempDir())...)...))
	})
	if u.sum.WeightsSHA256 == "" {
		t.Fatal("no uninterrupted run to compare with")
	}
	return u.sum
}

// A job submitted with batchkit sbatch --requeue, signalled mid-run with
// SIGUSR1 (scancel --full: every process of the job; scancel --batch: the
// batch shell alone), checkpoints, requeues itself, runs again and resumes:
// it ends with the weights of an uninterrupted run.
func TestSbatchRequeueSrun(t *testing.T) {
	testSbatchRequeue(t, []string{"--launcher", "srun"}) // the local profile: srun --mpi=pmix
}

func TestSbatchRequeueMpirun(t *testing.T) {
	needTool(t, "mpirun.openmpi")
	testSbatchRequeue(t, nil) // the local profile: mpirun.openmpi
}

// The oneCCL backend under the intel-pip profile, its ranks an srun step
// across both nodes: its weights are the TCP backend's bit for bit, so the
// uninterrupted run is the same. scancel --batch only (what sbatch
// --signal=B:USR1@T does): one signal path shows the backend checkpoints
// and resumes. Not under Intel MPI's Hydra (the profile's mpirun): seen
// here, Hydra passes SIGUSR1 on to some ranks only, now and then, and
// exits 255 (docs/intel-wheels.md, "Signals").
func TestSbatchRequeueCCL(t *testing.T) {
	prefix := needIntel(t)
	needCluster(t)
	testSbatchRequeueOf(t, requeueCase{
		env:   intelEnv(os.Environ(), "VIRTUAL_ENV="+prefix),
		args:  []string{"--profile", "intel-pip", "--launcher", "srun"},
		prog:  []string{cclBinary(t), "train", "--backend", "ccl"},
		train: requeueTrainCCL,
		hows:  []string{"--batch"},
	})
}

func testSbatchRequeue(t *testing.T, launcher []string) {
	testSbatchRequeueOf(t, requeueCase{args: launcher, prog: []string{bin, "train"}, train: requeueTrain, hows: []string{"--full", "--batch"}})
}

// requeueCase is one job of testSbatchRequeueOf.
type requeueCase struct {
	env  []string // batchkit sbatch's environment; nil: the test's
	args []string // batchkit sbatch's launcher or profile flags
	prog []string // the trainer: binary, "train" and its backend
	// train is the trainer's flags, also those of the uninterrupted TCP run
	// the job's weights are compared with.
	train []string
	hows  []string // scancel's --full (every process of the job), --batch (the batch shell)
}

func testSbatchRequeueOf(t *testing.T, rc requeueCase) {
	needCluster(t)
	needTool(t, "scontrol")
	want := uninterruptedOf(t, rc.train)
	for _, how := range rc.hows {
		t.Run(strings.TrimPrefix(how, "--"), func(t *testing.T) {
			dir := t.TempDir()
			os.Chmod(dir, 0o777)
			ckpt := filepath.Join(dir, "ckpt")
			out := filepath.Join(dir, "job.out")
			args := append([]string{"sbatch", "--requeue", "-N", "2", "--ntasks-per-node", "1", "-o", out,
				"--sbatch-arg=--open-mode=append"}, rc.args...) // both runs' output, for the record
			args = append(append(args, "--"), rc.prog...)
			args = append(args, "--format", "json", "--checkpoint-dir", ckpt)
			args = append(args, rc.train...)
			env := rc.env
			if env == nil {
				env = os.Environ()
			}
			id := strings.TrimSpace(runEnv(t, env, bin, args...))
			t.Cleanup(func() { exec.Command("scancel", id).Run() }) // a no-op once it is done
			start := time.Now()

			waitCheckpoint(t, ckpt, 50)
			run(t, time.Minute, "scancel", "--signal=USR1", how, id)
			state, restarts := waitJobRequeued(t, id)
			b, _ := os.ReadFile(out)
			if state != "COMPLETED" || restarts != 1 {
				t.Fatalf("job %s: %s after %d restarts, want COMPLETED after 1\njob output:\n%s", id, state, restarts, b)
			}
			got := lastSummary(t, string(b))
			t.Logf("job %s: signalled (scancel %s) after checkpoint 50, requeued, resumed from step %d; %.1f s in all",
				id, how, got.ResumedFromStep, time.Since(start).Seconds())
			if !strings.Contains(string(b), "batchkit: exit 75 (checkpointed): requeueing job "+id) {
				t.Errorf("no requeue message in the job output:\n%s", b)
			}
			if got.ResumedFromStep < 50 || got.ResumedFromStep >= want.Steps {
				t.Errorf("resumed from step %d, want a step from 50 on, before %d", got.ResumedFromStep, want.Steps)
			}
			if wantBackend := backendOf(rc.prog); got.Backend != wantBackend {
				t.Errorf("the job trained on backend %q, want %q", got.Backend, wantBackend)
			}
			if got.WeightsSHA256 != want.WeightsSHA256 || got.Steps != want.Steps || got.WorldSize != 2 {
				t.Errorf("requeued job: %d steps on %d ranks, weights %s; uninterrupted: %d steps, %s\njob output:\n%s",
					got.Steps, got.WorldSize, got.WeightsSHA256, want.Steps, want.WeightsSHA256, b)
			}
		})
	}
}

var (
	jobStateRE = regexp.MustCompile(`\bJobState=(\S+)`)
	restartsRE = regexp.MustCompile(`\bRestarts=(\d+)`)
	reasonRE   = regexp.MustCompile(`\bReason=(\S+)`)
)

// waitJobRequeued waits until job id has ended and returns its final state
// and restart count. Slurm holds a requeued job for 120 s (Reason=BeginTime);
// the test lets it start sooner, but not in the second the job was
// requeued: slurmd refuses a job whose credential is no newer than the
// revocation of its last run's ("Job credential revoked", seconds resolution),
// and not while a slurmstepd of its last run is still exiting: the new run's
// step 0 would find srun --mpi=pmix's socket for step 0 taken (seen under
// load: "Cannot bind() UNIX socket .../stepd.slurm.pmix.JOB.0").
func waitJobRequeued(t *testing.T, id string) (state string, restarts int) {
	t.Helper()
	released := false
	var pendingSince time.Time
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		b, err := exec.Command("scontrol", "show", "job", id).Output()
		if err != nil {
			t.Fatalf("scontrol show job %s: %v", id, err)
		}
		s := string(b)
		state = submatch(jobStateRE, s)
		restarts = 0
		if r := submatch(restartsRE, s); r != "" {
			json.Unmarshal([]byte(r), &restarts)
		}
		switch {
		case state == "PENDING" && restarts > 0 && submatch(reasonRE, s) == "BeginTime" && !released:
			if pendingSince.IsZero() {
				pendingSince = time.Now()
			}
			if time.Since(pendingSince) > 2*time.Second && !stepdAlive(id) {
				run(t, time.Minute, "scontrol", "update", "JobId="+id, "StartTime=now")
				released = true
			}
		case state == "COMPLETED", state == "FAILED", state == "CANCELLED", state == "TIMEOUT", state == "NODE_FAIL", state == "OUT_OF_MEMORY":
			return state, restarts
		}
	}
	t.Fatalf("job %s still %s after 90 s (%d restarts)", id, state, restarts)
	return "", 0
}

// stepdAlive reports whether a slurmstepd of job id's steps still runs on
// this machine, which holds both of the test cluster's nodes.
func stepdAlive(id string) bool {
	return exec.Command("pgrep", "-f", `^slurmstepd: \[`+id+`\.[0-9]+\]`).Run() == nil
}

func submatch(re *regexp.Regexp, s string) string {
	if m := re.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// lastSummary is the last line of the job's output that holds rank 0's JSON
// summary (srun and mpirun print it without a rank prefix).
func lastSummary(t *testing.T, out string) trainSummary {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], `{"test_accuracy"`) {
			var s trainSummary
			if err := json.Unmarshal([]byte(lines[i]), &s); err != nil {
				t.Fatalf("%v: %s", err, lines[i])
			}
			return s
		}
	}
	t.Fatalf("no summary in the job output:\n%s", out)
	return trainSummary{}
}

// backendOf is the --backend a trainer command line names; tcp (what auto
// picks in a build without MPI) when it names none.
func backendOf(prog []string) string {
	for i, a := range prog {
		if a == "--backend" && i+1 < len(prog) {
			return prog[i+1]
		}
	}
	return "tcp"
}
