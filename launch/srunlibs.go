package launch

import (
	"maps"
	"os"
	"os/exec"

	"github.com/batchkit/batchkit/mpirun"
)

// WithSrunLibs is vars (a profile's [env.vars]) with what ranks of flavor
// need when srun starts them directly through plugin: Intel MPI's
// I_MPI_PMI_LIBRARY naming Slurm's libpmi2 (mpirun.SrunLibEnv), found on
// this machine. A variable vars already has stays; as one of the profile's,
// the user's exported value or --env wins over it.
func WithSrunLibs(vars map[string]string, flavor string, launcher mpirun.Program, plugin string) map[string]string {
	if launcher != mpirun.ProgramSrun || flavor == "" {
		return vars
	}
	srun, _ := exec.LookPath("srun")
	exists := func(p string) bool { fi, err := os.Stat(p); return err == nil && !fi.IsDir() }
	add := mpirun.SrunLibEnv(mpirun.Flavor(flavor), plugin, srun, exists)
	if len(add) == 0 {
		return vars
	}
	out := maps.Clone(vars)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range add {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}
