package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// An outer launch's node count never reaches an inner launch's ranks: Hydra
// passes mpirun's whole environment on, and a stale count misplaces ranks.
func TestWithoutVar(t *testing.T) {
	in := []string{"A=1", "BATCHKIT_MPIRUN_NUM_NODES=3", "B=2", "BATCHKIT_MPIRUN_NUM_NODES=4", "BATCHKIT_MPIRUN_NUM_NODESX=5"}
	want := []string{"A=1", "B=2", "BATCHKIT_MPIRUN_NUM_NODESX=5"}
	if diff := cmp.Diff(want, withoutVar(in, "BATCHKIT_MPIRUN_NUM_NODES")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A profile variable the user has, even set to empty, keeps the user's
// value (as in batch scripts); the others keep the profile's.
func TestUsersOver(t *testing.T) {
	user := map[string]string{"CCL_WORKER_COUNT": "4", "FI_PROVIDER": ""}
	lookup := func(k string) (string, bool) { v, ok := user[k]; return v, ok }
	got := usersOver(map[string]string{"CCL_WORKER_COUNT": "1", "FI_PROVIDER": "tcp", "I_MPI_PIN_DOMAIN": "auto"}, lookup)
	want := map[string]string{"CCL_WORKER_COUNT": "4", "FI_PROVIDER": "", "I_MPI_PIN_DOMAIN": "auto"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
