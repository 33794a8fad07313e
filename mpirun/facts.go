package mpirun

import (
	"fmt"
	"slices"
	"strings"
)

// Flavor facts that a site profile checks its [mpi] keys against, read
// from the flavor rows (flavorRows) so that there is one copy of them:
// package profile asks these functions rather than keeping lists of its own.

// bootstrapSet is one launcher family's values of mpi.bootstrap.
type bootstrapSet struct {
	what   string // "a Hydra bootstrap (-bootstrap)", in error messages
	whose  string // "Hydra's", in the message for a value of no flavor
	values []string
}

var (
	// hydraBootstraps are the values of Hydra's -bootstrap (MPICH, Intel
	// MPI, MVAPICH2's mpiexec).
	hydraBootstraps = bootstrapSet{"a Hydra bootstrap (-bootstrap)", "Hydra's",
		[]string{"ssh", "rsh", "pdsh", "pbsdsh", "pbs", "fork", "persist", "slurm", "ll", "lsf", "sge", "jmi", "manual"}}
	// openMPIBootstraps are Open MPI's plm components (mpirun --mca plm).
	openMPIBootstraps = bootstrapSet{"an Open MPI plm component (--mca plm)", "Open MPI's",
		[]string{"rsh", "slurm", "tm", "lsf", "alps", "isolated"}}
	// bootstrapSets lists every family, in the order messages name them.
	bootstrapSets = []*bootstrapSet{&hydraBootstraps, &openMPIBootstraps}
)

// Bootstraps lists the bootstraps of flavor f's launchers (mpi.bootstrap).
func Bootstraps(f Flavor) []string {
	if b := flavorRows[f].bootstraps; b != nil {
		return slices.Clone(b.values)
	}
	return nil
}

// CheckBootstrap reports whether b is a bootstrap of flavor f's launchers,
// and why not.
func CheckBootstrap(f Flavor, b string) error {
	set := flavorRows[f].bootstraps
	if set == nil {
		set = &hydraBootstraps
	}
	if !slices.Contains(set.values, b) {
		return fmt.Errorf("%q is not %s: want one of %s", b, set.what, strings.Join(set.values, ", "))
	}
	return nil
}

// CheckAnyBootstrap reports whether b is a bootstrap of some flavor's
// launchers (a profile checks it against its flavor later), and why not;
// quote writes b as the message shows it.
func CheckAnyBootstrap(b string, quote func(string) string) error {
	var want []string
	for _, set := range bootstrapSets {
		if slices.Contains(set.values, b) {
			return nil
		}
		want = append(want, set.whose+" "+strings.Join(set.values, ", "))
	}
	return fmt.Errorf("unknown bootstrap %s: want %s", quote(b), strings.Join(want, ", or "))
}

// CheckSrunMPI reports whether ranks of flavor f can wire up through
// srun --mpi=plugin, and why not.
func CheckSrunMPI(f Flavor, plugin string) error {
	r := flavorRows[f]
	switch {
	case plugin == "none":
		return fmt.Errorf("srun --mpi=none gives %s ranks no PMI to find each other: use %s", f, DefaultSrunMPI(f))
	case plugin == "cray_shasta":
		return fmt.Errorf("srun --mpi=cray_shasta is for Cray MPICH, not %s: use %s", f, DefaultSrunMPI(f))
	case r.srunNeeds != "" && !strings.HasPrefix(plugin, r.srunNeeds):
		return fmt.Errorf("%s under srun needs --mpi=%s (%s), not %s", r.name, r.srunNeeds, r.srunWhy, plugin)
	}
	return nil
}

// LauncherOption is a launcher setting that only some flavors' launchers
// have (Spec.AllowRunAsRoot, Spec.Oversubscribe).
type LauncherOption int

const (
	AllowRunAsRoot LauncherOption = iota
	Oversubscribe
)

// Takes reports whether flavor f's launchers have option o; the others
// ignore it.
func Takes(f Flavor, o LauncherOption) bool {
	r, ok := flavorRows[f]
	if !ok {
		return false
	}
	for _, l := range []launcherRow{r.mpirun, r.mpiexec} {
		sx := l.syntax
		if o == AllowRunAsRoot && sx.allowRoot == "" || o == Oversubscribe && sx.oversubscribe == "" {
			return false
		}
	}
	return true
}

// TakenBy names the flavors whose launchers have option o, as messages
// name them: "Open MPI".
func TakenBy(o LauncherOption) string {
	var names []string
	for _, f := range Flavors {
		if Takes(f, o) {
			names = append(names, flavorRows[f].name)
		}
	}
	return strings.Join(names, " or ")
}
