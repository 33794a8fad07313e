package integration

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/batchkit/batchkit/envsetup"
)

// Open MPI's --bind-to core puts each of 2 ranks on one core; with
// OMP_NUM_THREADS=8 their threads would share it: batchkit exec says so,
// once (local rank 0). Unbound, with as many threads as this machine has
// CPUs, it says nothing (issue 30 item 19: the site-admin guide's example
// bound each rank to one core and set 8 threads, and nothing warned).
func TestThreadsWarningUnderOpenMPI(t *testing.T) {
	mostlyWaits(t)
	if testing.Short() {
		t.Skip("runs Open MPI's mpirun")
	}
	needTool(t, "mpirun.openmpi")
	cpus, err := envsetup.ReadCPUs("/")
	if err != nil {
		t.Fatal(err)
	}
	warn := regexp.MustCompile(`(?m)^batchkit exec: OMP_NUM_THREADS=\d+, but this rank is bound to \d+ CPU\(s\)`)
	for _, tc := range []struct {
		bind, threads string
		warns         int
	}{{"core", "8", 1}, {"none", strconv.Itoa(len(cpus.Allowed)), 0}} {
		t.Run("--bind-to "+tc.bind, func(t *testing.T) {
			code, _, stderr := runExit(t, localEnv(), []string{bin, "mpirun", "--flavor", "openmpi", "--allow-run-as-root", "-n", "2",
				"--mpi-arg", "--bind-to", "--mpi-arg", tc.bind, "--env", "OMP_NUM_THREADS=" + tc.threads, "--", "true"})
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			if n := len(warn.FindAllString(stderr, -1)); n != tc.warns {
				t.Errorf("%d warning(s), want %d; stderr:\n%s", n, tc.warns, stderr)
			}
		})
	}
}
