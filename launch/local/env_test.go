package local

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/envsetup"
)

// RankEnv's cases are envsetup's (TestRankEnvRun); this is the wiring.
func TestRankEnv(t *testing.T) {
	top := RankTopology(1, 2, 40001)
	if err := top.Validate(); err != nil {
		t.Fatal(err)
	}
	got := rankEnv([]string{"PATH=/bin", "RANK=99"}, Profile{}, top, (&runner{token: "tok", runID: "run-1", restart: 1, Plan: Plan{Options: Options{MaxRestarts: 3}}}).envAttempt())
	want := []string{
		"BATCHKIT_JOB_TOKEN=tok", "GROUP_RANK=0", "GROUP_WORLD_SIZE=1", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=40001", "NODE_RANK=0", "PATH=/bin", "RANK=1",
		"TORCHELASTIC_MAX_RESTARTS=3", "TORCHELASTIC_RESTART_COUNT=1", "TORCHELASTIC_RUN_ID=run-1", "WORLD_SIZE=2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rankEnv (-want +got):\n%s", diff)
	}
}

// A profile's layers (batchkit run --profile) go under the user's values
// and the contract: RankEnv's rule, whose cases are envsetup's.
func TestRankEnvProfile(t *testing.T) {
	p := Profile{
		Sourced: envsetup.Changes{Set: map[string]string{"PATH": "/opt/mpi/bin:/bin", "CCL_WORKER_COUNT": "8"}},
		Vars:    map[string]string{"CCL_WORKER_COUNT": "1", "FI_PROVIDER": "tcp", "RANK": "7"},
	}
	got := rankEnv([]string{"PATH=/bin", "FI_PROVIDER=shm"}, p, RankTopology(0, 1, 40001), envsetup.Attempt{Token: "tok", RunID: "r"})
	want := []string{
		"BATCHKIT_JOB_TOKEN=tok", "CCL_WORKER_COUNT=1", "FI_PROVIDER=shm", "GROUP_RANK=0", "GROUP_WORLD_SIZE=1",
		"LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=40001", "NODE_RANK=0",
		"PATH=/opt/mpi/bin:/bin", "RANK=0", "TORCHELASTIC_MAX_RESTARTS=0", "TORCHELASTIC_RESTART_COUNT=0",
		"TORCHELASTIC_RUN_ID=r", "WORLD_SIZE=1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rankEnv (-want +got):\n%s", diff)
	}
}
