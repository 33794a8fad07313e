package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// requeueTrainCCL is short: oneCCL over libfabric's tcp provider takes ~3 s
// an epoch of it here, the TCP backend a fraction.
var requeueTrainCCL = []string{"--hidden", "512,512", "--batch-size", "8", "--epochs", "4", "--checkpoint-every", "5"}

// The oneCCL backend under the intel-pip profile, its ranks on both nodes
// as an srun step (--launcher srun) and under Intel MPI's Hydra (the
// profile's mpirun, -bootstrap slurm), preempted (scancel --signal=USR1
// --batch: what sbatch --signal=B:USR1@T does; under Hydra also
// scancel --signal=USR1 to the steps, where its proxies run) after
// checkpoint 50: the job requeues, keeps both runs' output and ends with the
// weights of an uninterrupted run, which are the TCP backend's bit for bit.
// Under Hydra that needs the batch script's SIGUSR1 shield and
// -disable-auto-cleanup (docs/intel-wheels.md, "Signals").
func TestSbatchRequeueCCL(t *testing.T) {
	prefix := needIntel(t)
	needCluster(t)
	needTool(t, "scontrol")
	prog := cclBinary(t)
	want := summaryOf(t, run(t, 2*time.Minute, bin, trainArgs(append(append([]string{}, requeueTrainCCL...), "--checkpoint-dir", t.TempDir())...)...))
	for _, tc := range []struct {
		name     string
		launcher []string // batchkit sbatch's flags
		signal   []string // scancel's
	}{
		{"srun", []string{"--launcher", "srun"}, []string{"--signal=USR1", "--batch"}},
		{"hydra", nil, []string{"--signal=USR1", "--batch"}},
		{"hydra, USR1 to the steps", nil, []string{"--signal=USR1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			os.Chmod(dir, 0o777)
			ckpt := filepath.Join(dir, "ckpt")
			out := filepath.Join(dir, "job.out")
			args := append([]string{"sbatch", "--requeue", "-N", "2", "--ntasks-per-node", "1", "-o", out,
				"--profile", "intel-pip"}, tc.launcher...)
			args = append(append(args, "--", prog, "train", "--backend", "ccl", "--format", "json", "--checkpoint-dir", ckpt), requeueTrainCCL...)
			id := strings.TrimSpace(runEnv(t, intelEnv(os.Environ(), "VIRTUAL_ENV="+prefix), bin, args...))
			t.Cleanup(func() { exec.Command("scancel", id).Run() }) // a no-op once it is done

			// Its time in the queue, behind the other cases' jobs and any
			// other user's, counts.
			if err := waitCheckpointErr(ckpt, 50, 3*time.Minute); err != nil {
				t.Fatal(err)
			}
			run(t, time.Minute, "scancel", append(tc.signal, id)...)
			state, restarts := waitJobRequeued(t, id)
			b, _ := os.ReadFile(out)
			if state != "COMPLETED" || restarts != 1 {
				t.Fatalf("job %s: %s after %d restarts, want COMPLETED after 1\njob output:\n%s", id, state, restarts, b)
			}
			if err := bothRuns(string(b), id, ckpt); err != nil {
				t.Fatal(err)
			}
			got := lastSummary(t, string(b))
			if got.WeightsSHA256 != want.WeightsSHA256 || got.Steps != want.Steps {
				t.Errorf("requeued ccl job: %d steps, weights %s; uninterrupted tcp: %d steps, %s\njob output:\n%s",
					got.Steps, got.WeightsSHA256, want.Steps, want.WeightsSHA256, b)
			}
		})
	}
}
