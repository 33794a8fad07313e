package launch

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/mpirun"
)

// Only ranks srun starts itself get a library named: under mpirun, or with
// no flavor, the profile's variables go through as they are.
func TestWithSrunLibsOnlyForSrun(t *testing.T) {
	vars := map[string]string{"A": "1"}
	for _, tc := range []struct {
		name     string
		flavor   string
		launcher mpirun.Program
	}{
		{"mpirun", "intelmpi", mpirun.ProgramMpirun},
		{"no flavor", "", mpirun.ProgramSrun},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(vars, WithSrunLibs(vars, tc.flavor, tc.launcher, "pmi2")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
