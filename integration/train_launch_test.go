package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// trainFlags is the run every launcher trains: 2 ranks, 10 epochs of the
// default model (~0.1 s of training; ≥ 97 % test accuracy).
var trainFlags = []string{"train", "--format", "json", "--epochs", "10"}

// trainSummaryIn finds rank 0's summary in a launcher's output, whatever
// the launcher puts before it ("[0] " from batchkit run, nothing from
// mpirun or srun).
func trainSummaryIn(t *testing.T, out string) trainSummary {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		i := strings.Index(l, `{"test_accuracy"`)
		if i < 0 {
			continue
		}
		var s trainSummary
		if err := json.Unmarshal([]byte(l[i:]), &s); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		return s
	}
	t.Fatalf("no summary from rank 0 in:\n%s", out)
	return trainSummary{}
}

// sbatchTrain runs `batchkit sbatch --wait -N 2 --ntasks-per-node 1 [flags]
// -- bk train ...`, env set in the submitting environment (which sbatch
// exports to the job), and returns the job's output.
func sbatchTrain(t *testing.T, bk string, flags []string, env ...string) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	out := filepath.Join(dir, "job.out")
	args := append([]string{"sbatch", "--wait", "-N", "2", "--ntasks-per-node", "1", "-o", out}, flags...)
	args = append(append(args, "--", bk), trainFlags...)
	runEnvTimeout(t, 3*time.Minute, append(os.Environ(), env...), bin, args...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// batchkit train under every launcher, 2 ranks, the same flags: each run
// reaches 95 % test accuracy, and runs of one build and backend end with
// the same weights whatever started them (the loop is deterministic; the
// weights are compared only within a build, since another backend or MPI
// library may sum in another order). The plain binary runs the TCP
// backend under batchkit run, batchkit mpirun (both flavors), srun and
// batchkit sbatch (mpirun.openmpi inside the job, the local profile, and
// srun); the MPI builds run the MPI backend under batchkit mpirun, srun
// --mpi=pmi2 (MPICH) and batchkit sbatch.
func TestTrainEveryLauncher(t *testing.T) {
	mostlyWaits(t)
	if testing.Short() {
		t.Skip("runs real launchers")
	}
	ompiFlags := []string{"--allow-run-as-root", "--oversubscribe"}
	// The first weights each build and backend ended with, and where (the
	// subtests run one after another).
	type launchWeights struct{ name, sha string }
	trainWeights := map[string]launchWeights{}
	for _, tc := range []struct {
		name    string
		build   string // "" (tcp), "mpi" (Open MPI) or "mpich": the binary
		backend string // --backend and the summary's
		tool    string // needed on PATH
		cluster bool
		launch  func(t *testing.T, bk string) string
	}{
		{name: "tcp/batchkit run", backend: "tcp", launch: func(t *testing.T, bk string) string {
			return runLocal(t, bin, append([]string{"run", "-n", "2", "--", bk}, trainFlags...)...)
		}},
		{name: "tcp/batchkit mpirun openmpi", backend: "tcp", tool: "mpirun.openmpi", launch: func(t *testing.T, bk string) string {
			return runLocal(t, bin, append(append(append([]string{"mpirun", "--flavor", "openmpi", "-n", "2"}, ompiFlags...), "--", bk), trainFlags...)...)
		}},
		{name: "tcp/batchkit mpirun mpich", backend: "tcp", tool: "mpirun.mpich", launch: func(t *testing.T, bk string) string {
			return runLocal(t, bin, append([]string{"mpirun", "--flavor", "mpich", "-n", "2", "--", bk}, trainFlags...)...)
		}},
		{name: "tcp/srun", backend: "tcp", cluster: true, launch: func(t *testing.T, bk string) string {
			return run(t, 2*time.Minute, "srun", append([]string{"-N2", "-n2", "--time=5", bk}, trainFlags...)...)
		}},
		{name: "tcp/batchkit sbatch (mpirun.openmpi)", backend: "tcp", cluster: true, launch: func(t *testing.T, bk string) string {
			return sbatchTrain(t, bk, nil)
		}},
		{name: "tcp/batchkit sbatch (srun)", backend: "tcp", cluster: true, launch: func(t *testing.T, bk string) string {
			return sbatchTrain(t, bk, []string{"--launcher", "srun", "--flavor", "mpich"})
		}},
		{name: "openmpi/batchkit mpirun", build: "mpi", backend: "mpi", tool: "mpirun.openmpi", launch: func(t *testing.T, bk string) string {
			return runLocal(t, bin, append(append(append([]string{"mpirun", "--flavor", "openmpi", "-n", "2"}, ompiFlags...), "--", bk), append(trainFlags, "--backend", "mpi")...)...)
		}},
		// Both "nodes" are this host under one hostname: Open MPI's
		// shared-memory BTL would map one segment for ranks it believes are
		// on different nodes (see TestSbatchBenchMPI); real nodes do not
		// share /dev/shm.
		{name: "openmpi/batchkit sbatch (mpirun.openmpi)", build: "mpi", backend: "mpi", tool: "mpirun.openmpi", cluster: true,
			launch: func(t *testing.T, bk string) string {
				return sbatchTrain(t, bk, nil, "OMPI_MCA_btl=^vader")
			}},
		{name: "mpich/batchkit mpirun", build: "mpich", backend: "mpi", tool: "mpirun.mpich", launch: func(t *testing.T, bk string) string {
			return runLocal(t, bin, append([]string{"mpirun", "--flavor", "mpich", "-n", "2", "--", bk}, append(trainFlags, "--backend", "mpi")...)...)
		}},
		{name: "mpich/srun --mpi=pmi2", build: "mpich", backend: "mpi", cluster: true, launch: func(t *testing.T, bk string) string {
			return run(t, 2*time.Minute, "srun", append([]string{"-N2", "-n2", "--mpi=pmi2", "--time=5", bk}, append(trainFlags, "--backend", "mpi")...)...)
		}},
		{name: "mpich/batchkit sbatch (srun)", build: "mpich", backend: "mpi", cluster: true, launch: func(t *testing.T, bk string) string {
			return sbatchTrain(t, bk, []string{"--launcher", "srun", "--flavor", "mpich"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cluster {
				needCluster(t)
			}
			if tc.tool != "" {
				needTool(t, tc.tool)
			}
			bk := bin
			if tc.build != "" {
				bk = batchkitMPI(t, tc.build)
			}
			s := tc.launch(t, bk)
			got := trainSummaryIn(t, s)
			want := trainSummary{TestAccuracy: got.TestAccuracy, Steps: 230, WorldSize: 2, Backend: tc.backend,
				WeightsSHA256: got.WeightsSHA256}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			if got.TestAccuracy < 0.95 {
				t.Errorf("test accuracy %.4f, want >= 0.95", got.TestAccuracy)
			}
			group := tc.build + "/" + tc.backend
			if first, ok := trainWeights[group]; ok {
				if got.WeightsSHA256 != first.sha {
					t.Errorf("weights %s, but %s (the same build and backend) ended with %s", got.WeightsSHA256, first.name, first.sha)
				}
			} else {
				trainWeights[group] = launchWeights{tc.name, got.WeightsSHA256}
			}
			t.Logf("test accuracy %.4f, weights %s", got.TestAccuracy, got.WeightsSHA256)
		})
	}
}
