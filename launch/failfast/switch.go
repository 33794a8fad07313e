package failfast

import (
	"fmt"
	"strings"

	"github.com/batchkit/batchkit/envvars"
)

// Switch is a flag of batchkit mpirun and sbatch that sets
// BATCHKIT_FAIL_FAST on every rank, and the value it sets.
type Switch struct{ Flag, Value, Usage string }

// Switches are both, in the order their help lists them.
var Switches = []Switch{
	{"no-fail-fast", "0", "let the other ranks run on when one fails, as the launcher would (Hydra does): every rank gets BATCHKIT_FAIL_FAST=0, so batchkit exec does not watch; a launcher that stops the job itself (Open MPI, srun with SLURM_KILL_BAD_EXIT=1) still does"},
	{"fail-fast", "1", "have batchkit exec watch the other ranks under any launcher: every rank gets BATCHKIT_FAIL_FAST=1 (the ranks need a job token: not mpirun_rsh outside an allocation)"},
}

// Choose is the BATCHKIT_FAIL_FAST value of the switches given (given
// says whether a flag is), "" when neither is. env is the launch's --env
// entries: setting the variable there too would leave two answers, and is
// refused, as both switches are.
func Choose(given func(flag string) bool, env []string) (string, error) {
	value, flag := "", ""
	for _, s := range Switches {
		if !given(s.Flag) {
			continue
		}
		if flag != "" {
			return "", fmt.Errorf("%s and --%s: choose one", flag, s.Flag)
		}
		value, flag = s.Value, "--"+s.Flag
	}
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == envvars.FailFast && flag != "" {
			return "", fmt.Errorf("%s and --env %s: both set %s; give one", flag, kv, envvars.FailFast)
		}
	}
	return value, nil
}
