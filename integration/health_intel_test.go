package integration

import (
	"path/filepath"
	"testing"
	"time"
)

// The health report (--report) on Intel's stack for real: batchkit's MPI
// backend built against Intel MPI (make build-mpi MPI=intel) under the
// wheel's own mpiexec, and the oneCCL backend (make build-ccl). The ring
// links are measured over connections of the report's own, the same under
// every backend; these runs check that they open under each launcher and
// that an even run of two ranks is complete and names nobody.

// evenReport fails t unless h is the complete report of an even run of
// two ranks: both rows, every link measured (the broadcast and both ring
// links), nothing named, nothing crowded.
func evenReport(t *testing.T, h healthReport) {
	t.Helper()
	checkLinks(t, h, 2)
	for _, r := range h.Ranks {
		if !(r.LinkGBs > 0) {
			t.Errorf("rank %d: broadcast link %v GB/s: want it measured", r.Rank, r.LinkGBs)
		}
	}
	if len(h.Outliers) != 0 || len(h.Crowded) != 0 {
		t.Errorf("outliers %+v, crowded %+v in an even run: want none\nranks %+v", h.Outliers, h.Crowded, h.Ranks)
	}
}

// bench and train --report with --backend mpi, Intel MPI's mpiexec -n 2.
func TestHealthReportIntelMPI(t *testing.T) {
	prefix := needIntel(t)
	abi := filepath.Join(intelBinaries(t), "batchkit-intel")
	mpiexec := filepath.Join(prefix, "bin", "mpiexec")
	env := intelEnv(localEnv())
	launch := []string{"mpirun", "--flavor", "intelmpi", "--mpirun", mpiexec, "-n", "2", "--", abi}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"bench", []string{"bench", "--backend", "mpi", "--max-bytes", "64K", "--iters", "20", "--report", "--format", "json"}},
		{"train", []string{"train", "--backend", "mpi", "--epochs", "1", "--report", "--format", "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evenReport(t, healthOf(t, runEnvTimeout(t, 2*time.Minute, env, abi, append(launch, tc.args...)...)))
		})
	}
}

// bench --report with --backend ccl, under batchkit run and under Intel
// MPI's mpiexec (Hydra gives no job id: the token is in the environment).
func TestHealthReportCCL(t *testing.T) {
	prefix := needIntel(t)
	b := cclBinary(t)
	bench := []string{b, "bench", "--backend", "ccl", "--max-bytes", "64K", "--iters", "20", "--report", "--format", "json"}
	for _, tc := range []struct {
		name   string
		env    []string
		launch []string
	}{
		{"batchkit run -n 2", localEnv(), []string{b, "run", "-n", "2", "--"}},
		{"Intel MPI mpiexec -n 2", intelEnv(localEnv(), "BATCHKIT_JOB_TOKEN=health-"+time.Now().Format(time.RFC3339Nano)),
			[]string{filepath.Join(prefix, "bin", "mpiexec"), "-n", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := append(tc.launch, bench...)
			evenReport(t, healthOf(t, runEnvTimeout(t, 2*time.Minute, tc.env, cmd[0], cmd[1:]...)))
		})
	}
}
