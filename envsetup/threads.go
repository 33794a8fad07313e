package envsetup

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/topology"
)

// ThreadsWarning says when OMP_NUM_THREADS (its first level: the value may
// list nested levels, "8,2") asks for more threads than this rank's CPUs,
// the affinity mask its launcher bound it to: its threads would then share
// them and wait on each other, as under Open MPI's --bind-to core (one core
// a rank) with OMP_NUM_THREADS=8. "" when they fit, or when the variable is
// unset or not a number (OpenMP ignores it then).
func ThreadsWarning(getenv topology.Getenv, cpus CPUSet) string {
	v := getenv("OMP_NUM_THREADS")
	first, _, _ := strings.Cut(v, ",")
	n, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || len(cpus.Allowed) == 0 || n <= len(cpus.Allowed) {
		return ""
	}
	ids := make([]int, len(cpus.Allowed))
	for i, c := range cpus.Allowed {
		ids[i] = c.ID
	}
	return fmt.Sprintf("OMP_NUM_THREADS=%s, but this rank is bound to %d CPU(s) (%s): its threads will share them; "+
		"give each rank %d cores (Open MPI: PE=%d in --map-by; srun: --cpus-per-task=%d), leave it unbound (--bind-to none) or set OMP_NUM_THREADS=%d",
		v, len(ids), FormatCPUList(ids), n, n, n, len(ids))
}
