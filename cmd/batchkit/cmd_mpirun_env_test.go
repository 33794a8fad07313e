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
