package mpirun

import (
	"maps"
	"testing"
)

func TestSrunLibEnv(t *testing.T) {
	has := func(files ...string) func(string) bool {
		return func(p string) bool {
			for _, f := range files {
				if f == p {
					return true
				}
			}
			return false
		}
	}
	deb := "/usr/lib/x86_64-linux-gnu/libpmi2.so.0"
	for _, tt := range []struct {
		name         string
		flavor       Flavor
		plugin, srun string
		exists       func(string) bool
		want         map[string]string
	}{
		{"Intel MPI, default plugin, Debian", IntelMPI, "", "/usr/bin/srun", has(deb), map[string]string{"I_MPI_PMI_LIBRARY": deb}},
		{"Intel MPI, pmi2, next to srun first", IntelMPI, "pmi2", "/opt/slurm/bin/srun", has(deb, "/opt/slurm/lib/libpmi2.so"),
			map[string]string{"I_MPI_PMI_LIBRARY": "/opt/slurm/lib/libpmi2.so"}},
		{"Intel MPI, RPM layout", IntelMPI, "", "", has("/usr/lib64/libpmi2.so"), map[string]string{"I_MPI_PMI_LIBRARY": "/usr/lib64/libpmi2.so"}},
		{"Intel MPI, no library", IntelMPI, "", "/usr/bin/srun", has(), nil},
		{"Intel MPI, pmix: nothing known", IntelMPI, "pmix", "/usr/bin/srun", has(deb), nil},
		{"MPICH links its own PMI client", MPICH, "", "/usr/bin/srun", has(deb), nil},
		{"Open MPI", OpenMPI, "", "/usr/bin/srun", has(deb), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := SrunLibEnv(tt.flavor, tt.plugin, tt.srun, tt.exists); !maps.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
