package integration

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// bothRuns checks that the output of job id, requeued once, holds both
// runs, each from its first line: without --open-mode=append Slurm truncated
// it at the second run's start. ckpt is train's checkpoint directory.
func bothRuns(out, id, ckpt string) error {
	for _, want := range []string{
		"batchkit: job " + id + ", run 1\n",
		"train: no checkpoint in " + ckpt + ": starting from step 0\n",
		"batchkit: preempted after step ",
		"batchkit: exit 75 (preempted): requeueing job " + id + "\n",
		"batchkit: job " + id + ", run 2 (requeued 1 time(s))\n",
		"train: resumed from " + ckpt + "/ckpt-",
	} {
		i := strings.Index(out, want)
		if i < 0 {
			return fmt.Errorf("job %s's output lacks %q, or has it out of order:\n%s", id, want, out)
		}
		out = out[i+len(want):]
	}
	return nil
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
	state, restarts, err := waitJobEnd(id, true, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return state, restarts
}

// waitJobEnd is waitJobRequeued without a *testing.T, for a goroutine: it
// waits up to timeout for job id to end and returns its final state and
// restart count. With release, a requeued job is let start again as soon as
// it safely can; without, a requeue ends the wait at once, state
// "REQUEUED". A job that has ended is waited for until its batch shell and
// steps are gone (a script that requeues does so as it ends), and looked at
// once more.
func waitJobEnd(id string, release bool, timeout time.Duration) (state string, restarts int, err error) {
	released := false
	var pendingSince time.Time
	show := func() (string, int, error) {
		b, err := exec.Command("scontrol", "show", "job", id).Output()
		if err != nil {
			return "", 0, fmt.Errorf("scontrol show job %s: %v", id, err)
		}
		s, n := string(b), 0
		if r := submatch(restartsRE, s); r != "" {
			json.Unmarshal([]byte(r), &n)
		}
		if submatch(jobStateRE, s) == "PENDING" && n > 0 && !release {
			return "REQUEUED", n, nil
		}
		if submatch(jobStateRE, s) == "PENDING" && n > 0 && submatch(reasonRE, s) == "BeginTime" && !released {
			if pendingSince.IsZero() {
				pendingSince = time.Now()
			}
			if time.Since(pendingSince) > 2*time.Second && !stepdAlive(id) {
				if out, err := exec.Command("scontrol", "update", "JobId="+id, "StartTime=now").CombinedOutput(); err != nil {
					return "", 0, fmt.Errorf("scontrol update JobId=%s StartTime=now: %v: %s", id, err, out)
				}
				released = true
			}
		}
		return submatch(jobStateRE, s), n, nil
	}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if state, restarts, err = show(); err != nil || state == "REQUEUED" {
			return state, restarts, err
		}
		switch state {
		case "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY":
			for stepdAlive(id) && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
			}
			return show()
		}
	}
	return state, restarts, fmt.Errorf("job %s still %s after %v (%d restarts)", id, state, timeout, restarts)
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
