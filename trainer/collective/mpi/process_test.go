package mpi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMPIProcs(t *testing.T) {
	for _, tc := range []struct {
		name       string
		current    int
		gomaxprocs string // in the environment
		want       int
	}{
		{"one core bound: raised to 2", 1, "", 2},
		{"already 2", 2, "", 2},
		{"more is kept", 8, "", 8},
		{"the user's GOMAXPROCS=1 is kept", 1, "1", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mpiProcs(tc.current, func(k string) string {
				if k == "GOMAXPROCS" {
					return tc.gomaxprocs
				}
				return ""
			})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mpiProcs(%d) (-want +got):\n%s", tc.current, diff)
			}
		})
	}
	if got := mpiProcs(1, nil); got != 2 {
		t.Errorf("mpiProcs(1, nil) = %d, want 2", got)
	}
}
