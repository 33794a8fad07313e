package local

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// RankEnv's cases are envsetup's (TestRankEnvRun); this is the wiring.
func TestRankEnv(t *testing.T) {
	top := RankTopology(1, 2, 40001)
	if err := top.Validate(); err != nil {
		t.Fatal(err)
	}
	got := rankEnv([]string{"PATH=/bin", "RANK=99"}, top, (&launch{token: "tok", runID: "run-1", restart: 1, opts: Options{MaxRestarts: 3}}).attempt())
	want := []string{
		"BATCHKIT_JOB_TOKEN=tok", "GROUP_RANK=0", "GROUP_WORLD_SIZE=1", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=40001", "NODE_RANK=0", "PATH=/bin", "RANK=1",
		"TORCHELASTIC_MAX_RESTARTS=3", "TORCHELASTIC_RESTART_COUNT=1", "TORCHELASTIC_RUN_ID=run-1", "WORLD_SIZE=2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rankEnv (-want +got):\n%s", diff)
	}
}
