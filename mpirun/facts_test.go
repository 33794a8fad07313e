package mpirun

import "testing"

func TestFlavorFacts(t *testing.T) {
	for _, f := range Flavors {
		want := f == OpenMPI
		if Takes(f, AllowRunAsRoot) != want || Takes(f, Oversubscribe) != want {
			t.Errorf("%s: Takes allow-run-as-root/oversubscribe: want %v", f, want)
		}
		if len(Bootstraps(f)) == 0 {
			t.Errorf("%s: no bootstraps", f)
		}
		if err := CheckSrunMPI(f, DefaultSrunMPI(f)); err != nil {
			t.Errorf("%s: its own default plugin: %v", f, err)
		}
	}
	if got := TakenBy(Oversubscribe); got != "Open MPI" {
		t.Errorf("TakenBy(Oversubscribe) = %q", got)
	}
	if CheckBootstrap(OpenMPI, "ssh") == nil || CheckBootstrap(MPICH, "ssh") != nil || CheckBootstrap(OpenMPI, "rsh") != nil {
		t.Error("CheckBootstrap: ssh is Hydra's, rsh both's")
	}
	if CheckAnyBootstrap("tm", func(s string) string { return s }) != nil || CheckAnyBootstrap("zq", func(s string) string { return s }) == nil {
		t.Error("CheckAnyBootstrap: tm is Open MPI's, zq nobody's")
	}
}
