package integration

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// batchkit exec exports the torchrun contract; the batchkit it starts reads
// that and, where it restates the launcher's ranks, the launcher's job id:
// under Open MPI the PMIx namespace, which the job token derives from when
// no BATCHKIT_JOB_TOKEN is set (issue 30, item 13: "no job token"). The
// argv `batchkit mpirun --dry-run --format json` prints runs as printed:
// it names the token without its value, so by hand the ranks derive it.
func TestExecThenTrainUnderOpenMPI(t *testing.T) {
	cpu.enter(t)
	if testing.Short() {
		t.Skip("runs Open MPI's mpirun")
	}
	needTool(t, "mpirun.openmpi")
	// No token: the ranks derive one, from a secret kept here.
	env := tokenEnv("XDG_CONFIG_HOME=" + t.TempDir())
	ompi := []string{"--allow-run-as-root", "--oversubscribe"}
	check := func(t *testing.T, out string) {
		t.Helper()
		got := trainSummaryIn(t, out)
		want := trainSummary{TestAccuracy: got.TestAccuracy, Steps: 230, WorldSize: 2, Backend: "tcp", WeightsSHA256: got.WeightsSHA256}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("summary (-want +got):\n%s", diff)
		}
	}
	t.Run("mpirun batchkit exec -- batchkit train", func(t *testing.T) {
		args := append(append(append(append([]string(nil), ompi...), "-n", "2", bin, "exec", "--"), bin), trainFlags...)
		check(t, runEnv(t, env, "mpirun.openmpi", args...))
	})
	t.Run("the dry run's argv, run as printed", func(t *testing.T) {
		args := append(append(append([]string{"mpirun", "--flavor", "openmpi", "--dry-run", "--format", "json", "-n", "2"}, ompi...), "--", bin), trainFlags...)
		out := runEnv(t, env, bin, args...)
		var plan struct {
			Argv []string `json:"argv"`
		}
		if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan.Argv) == 0 {
			t.Fatalf("dry run: %v:\n%s", err, out)
		}
		check(t, runEnv(t, env, plan.Argv[0], plan.Argv[1:]...))
	})
}
