package mpi

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/trainer/collective/backend"
)

func TestMPIHandoffAt(t *testing.T) {
	for _, tc := range []struct {
		name, env string // BATCHKIT_MPI_HANDOFF
		want      int
		wantErr   string
	}{
		{name: "unset: the default", env: "", want: HandoffDefault},
		{name: "0: never", env: "0", want: mpiHandoffNever},
		{name: "a size in bytes", env: "1048576", want: 1 << 20},
		{name: "1: every call that moves data", env: "1", want: 1},
		{name: "negative", env: "-1", wantErr: `BATCHKIT_MPI_HANDOFF="-1": want a size in bytes (calls that move at least that much run on the MPI worker thread) or 0 for never`},
		{name: "a unit is not a number", env: "16MiB", wantErr: `BATCHKIT_MPI_HANDOFF="16MiB": want a size in bytes (calls that move at least that much run on the MPI worker thread) or 0 for never`},
		{name: "too large", env: "99999999999999999999", wantErr: `BATCHKIT_MPI_HANDOFF="99999999999999999999": want a size in bytes (calls that move at least that much run on the MPI worker thread) or 0 for never`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mpiHandoffAt(func(k string) string {
				if k == "BATCHKIT_MPI_HANDOFF" {
					return tc.env
				}
				return ""
			})
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
				var se *backend.SetupError
				if !errors.As(err, &se) {
					t.Errorf("error %T, want a *SetupError (the user's setup: exit 2)", err)
				}
			}
			if diff := cmp.Diff(struct {
				At  int
				Err string
			}{tc.want, tc.wantErr}, struct {
				At  int
				Err string
			}{got, gotErr}); diff != "" {
				t.Errorf("mpiHandoffAt (-want +got):\n%s", diff)
			}
		})
	}
	if got, err := mpiHandoffAt(nil); err != nil || got != HandoffDefault {
		t.Errorf("no environment: %d, %v; want the default", got, err)
	}
}
