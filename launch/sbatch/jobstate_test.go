package sbatch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/launch"
)

// scontrol show job -o of a failed job on the test cluster (shortened),
// with a path holding a space.
const failedJob = `JobId=1823 JobName=sbatch UserId=me(1000) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) ` +
	`Requeue=1 Restarts=0 ExitCode=3:0 AllocNode:Sid=localhost:13432 NodeList=node[1-2] TRES=cpu=1,node=1,billing=1 ` +
	`WorkDir=/home/me/my runs StdErr=/home/me/my runs/err-1823.log StdIn=/dev/null StdOut=/home/me/my runs/slurm-1823.out Power= `

func TestParseJobState(t *testing.T) {
	want := JobState{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: "3:0", Nodes: "node[1-2]",
		StdOut: "/home/me/my runs/slurm-1823.out", StdErr: "/home/me/my runs/err-1823.log"}
	if diff := cmp.Diff(want, ParseJobState(failedJob)); diff != "" {
		t.Errorf("ParseJobState (-want +got):\n%s", diff)
	}
}

// A job that failed under sbatch --wait is named with its state and the
// files of its output (issue 30, item 17: only the job id was printed).
func TestFailedLine(t *testing.T) {
	for _, tt := range []struct {
		name string
		st   JobState
		err  error
		want string
	}{
		{"failed, output and errors apart", ParseJobState(failedJob), nil,
			"job 1823 FAILED (NonZeroExitCode, exit code 3:0, on node[1-2]): its output is in /home/me/my runs/slurm-1823.out, its errors in /home/me/my runs/err-1823.log"},
		{"time limit, one file", JobState{State: "TIMEOUT", Reason: "TimeLimit", ExitCode: "0:0", Nodes: "node1", StdOut: "/w/slurm-1823.out", StdErr: "/w/slurm-1823.out"}, nil,
			"job 1823 TIMEOUT (TimeLimit, exit code 0:0, on node1): its output is in /w/slurm-1823.out"},
		{"cancelled before it ran", JobState{State: "CANCELLED", Reason: "None", ExitCode: "0:0", Nodes: "(null)"}, nil,
			"job 1823 CANCELLED (exit code 0:0): it never started"},
		{"scontrol cannot say", JobState{}, errors.New("slurm_load_jobs error: Invalid job id specified"),
			"job 1823 ended with exit code 3 (scontrol show job 1823: slurm_load_jobs error: Invalid job id specified): its output is in the file --output names (slurm-1823.out by default), its state in sacct -j 1823"},
		{"escaped", JobState{State: "FAILED\x1b[2J", Nodes: "n1", StdOut: "/w/\x1b]0;x\a"}, nil, `job 1823 FAILED\x1b[2J (on n1): its output is in /w/\x1b]0;x\a`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := FailedLine("1823", 3, tt.st, tt.err); got != tt.want {
				t.Errorf("FailedLine =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// Run prints that line after sbatch --wait for a failed job, asking a
// (fake) scontrol; a job that completed gets none, and one that sbatch
// --wait says exited 0 but that was cancelled before it ran exits 1.
func TestRunNamesFailedJob(t *testing.T) {
	dir := fakeSbatch(t)
	scontrol := "#!/bin/sh\necho \"$@\" > \"$FAKE_DIR/scontrol-args\"\necho \"$FAKE_STATE\"\n"
	if err := os.WriteFile(filepath.Join(dir, "scontrol"), []byte(scontrol), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_OUT", `1823\n`)
	for _, tt := range []struct {
		job, state, stderr string
		code               int
	}{
		{"3", failedJob, "batchkit: job 1823 FAILED (NonZeroExitCode, exit code 3:0, on node[1-2]): its output is in /home/me/my runs/slurm-1823.out, its errors in /home/me/my runs/err-1823.log\n", 3},
		{"0", "JobId=1823 JobState=COMPLETED Reason=None ExitCode=0:0 NodeList=node1 StdOut=/w/o", "", 0},
		{"0", "JobId=1823 JobState=CANCELLED Reason=Resources ExitCode=0:0 NodeList=(null) StdOut=/w/o",
			"batchkit: job 1823 CANCELLED (Resources, exit code 0:0): it never started\n", 1},
		{"0", "", "", 0}, // scontrol has forgotten it: sbatch's word stands
	} {
		t.Setenv("FAKE_JOB", tt.job)
		t.Setenv("FAKE_STATE", tt.state)
		var stdout, stderr bytes.Buffer
		code, err := Run(context.Background(), Plan{Text: "#!/bin/sh\n", Wait: true}, launch.IO{Stdout: &stdout, Stderr: &stderr}, nil)
		if code != tt.code || err != nil || stdout.String() != "1823\n" || stderr.String() != tt.stderr {
			t.Errorf("job exits %s: code %d, err %v, stdout %q, stderr %q; want %d, nil, 1823, %q", tt.job, code, err, stdout.String(), stderr.String(), tt.code, tt.stderr)
		}
	}
	if args, _ := os.ReadFile(filepath.Join(dir, "scontrol-args")); string(args) != "show job -o 1823\n" {
		t.Errorf("scontrol %q, want show job -o 1823", args)
	}
}

// A job submitted from a shell without Slurm's client tools on PATH (a
// profile's wrapper sbatch) gets its line all the same, and it says why
// there is no state, not Go's exec error.
func TestJobStateWithoutScontrol(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := jobState("1823")
	if err == nil || err.Error() != "scontrol is not on PATH" {
		t.Fatalf("jobState without scontrol: %v, want scontrol is not on PATH", err)
	}
}
