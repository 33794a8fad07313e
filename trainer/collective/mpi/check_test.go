package mpi

import (
	"errors"
	"strings"
	"testing"

	"github.com/batchkit/batchkit/topology"
)

func TestMPICheckWorld(t *testing.T) {
	topo := func(l topology.Launcher, rank, size int) topology.Topology {
		return topology.Topology{Launcher: l, Rank: rank, WorldSize: size, LocalWorldSize: size, NumNodes: 1}
	}
	for _, tc := range []struct {
		name             string
		built            string
		mpiRank, mpiSize int
		t                topology.Topology
		want             []string // substrings; nil = no error
	}{
		{"match", "openmpi", 2, 4, topo(topology.OpenMPI, 2, 4), nil},
		{"match singleton", "mpich", 0, 1, topo(topology.Single, 0, 1), nil},
		{"openmpi under hydra", "openmpi", 0, 1, topo(topology.Hydra, 1, 2),
			[]string{"world of 1 process", "hydra launcher started 2 (this is rank 1)", "singleton", "built against Open MPI", "MPICH's mpiexec", "-tags mpich"}},
		{"mpich under openmpi", "mpich", 0, 1, topo(topology.OpenMPI, 0, 3),
			[]string{"world of 1 process", "openmpi launcher started 3", "built against MPICH", "Open MPI's mpirun", "-tags mpi"}},
		{"mpich under srun pmix", "mpich", 0, 1, topo(topology.PMIx, 0, 2), []string{"PMIx", "--mpi=pmi2"}},
		{"srun without --mpi", "mpich", 0, 1, topo(topology.Slurm, 3, 4), []string{"srun gave MPICH no way", "--mpi=pmi2"}},
		{"torchrun", "openmpi", 0, 1, topo(topology.Torchrun, 0, 2), []string{"torchrun", "--backend tcp"}},
		{"other launcher", "openmpi", 0, 1, topo(topology.MVAPICH, 0, 2), []string{"singleton", "Open MPI", "own mpirun"}},
		{"sizes differ", "openmpi", 0, 4, topo(topology.OpenMPI, 0, 2), []string{"world of 4 processes", "started 2"}},
		{"ranks differ", "mpich", 1, 2, topo(topology.Hydra, 0, 2), []string{"rank 1 of 2", "says rank 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkWorld(tc.built, tc.mpiRank, tc.mpiSize, tc.t)
			var we *WorldError
			if err != nil && !errors.As(err, &we) {
				t.Errorf("error %T, want *WorldError", err)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
}

func TestMPIErrorText(t *testing.T) {
	for _, tc := range []struct {
		call, class, msg string
		want             string
	}{
		// Open MPI's text starts with the class.
		{"MPI_Allreduce", "MPI_ERR_TRUNCATE", "MPI_ERR_TRUNCATE: message truncated", "MPI_Allreduce: MPI_ERR_TRUNCATE: message truncated"},
		// MPICH's does not, and spans lines.
		{"MPI_Bcast", "MPI_ERR_ROOT", "Invalid root, error stack:\ninternal_Bcast(107): MPI_Bcast(count=1, root=5) failed\ninternal_Bcast(61).: Invalid root (value given was 5)",
			"MPI_Bcast: MPI_ERR_ROOT: Invalid root, error stack: internal_Bcast(107): MPI_Bcast(count=1, root=5) failed; internal_Bcast(61).: Invalid root (value given was 5)"},
		{"MPI_Barrier", "", "", "MPI_Barrier: error code 17"},
		{"MPI_Barrier", "MPI_ERR_OTHER", "", "MPI_Barrier: MPI_ERR_OTHER: error code 17"},
	} {
		var err error = newError(tc.call, 17, tc.class, tc.msg)
		if got := err.Error(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
		var me *Error
		if !errors.As(err, &me) || me.Call != tc.call || me.Code != 17 {
			t.Errorf("errors.As: %#v", me)
		}
	}
}

// TestMPIWireUp: which launcher's world each library joins, by the
// interfaces detection says are offered (detect's TestLauncherFacts reads
// them from the variables).
func TestMPIWireUp(t *testing.T) {
	topo := func(l topology.Launcher, size int, pmi topology.PMI) topology.Topology {
		return topology.Topology{Launcher: l, WorldSize: size, LocalWorldSize: size, NumNodes: 1, PMI: pmi}
	}
	env := func(kv ...string) topology.Getenv {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	pmi2, pmix, orte := topology.OffersPMI2, topology.OffersPMIx, topology.OffersORTE
	for _, tc := range []struct {
		name    string
		built   string
		t       topology.Topology
		getenv  topology.Getenv
		offered bool
	}{
		{"openmpi under its mpirun", "openmpi", topo(topology.OpenMPI, 4, orte|pmix), env(), true},
		{"openmpi under srun --mpi=pmix", "openmpi", topo(topology.Slurm, 2, pmix), env(), true},
		{"openmpi under a PMIx launcher", "openmpi", topo(topology.PMIx, 2, pmix), env(), true},
		{"openmpi under srun --mpi=pmi2", "openmpi", topo(topology.Slurm, 2, pmi2), env(), false},
		{"openmpi under srun without --mpi", "openmpi", topo(topology.Slurm, 2, 0), env(), false},
		{"openmpi under hydra", "openmpi", topo(topology.Hydra, 2, pmi2), env(), false},
		{"mpich under hydra", "mpich", topo(topology.Hydra, 2, pmi2), env(), true},
		{"mpich under srun --mpi=pmi2", "mpich", topo(topology.Slurm, 2, pmi2), env(), true},
		{"mpich under MVAPICH", "mpich", topo(topology.MVAPICH, 2, pmi2), env(), true},
		{"mpich under Cray PALS", "mpich", topo(topology.PALS, 2, pmi2), env(), true},
		{"mpich under srun --mpi=pmix", "mpich", topo(topology.PMIx, 2, pmix), env(), false},
		{"intel mpi pointed at libpmix", "mpich", topo(topology.PMIx, 2, pmix), env("I_MPI_PMI_LIBRARY", "/usr/lib64/libpmix.so"), true},
		{"intel mpi pointed at libpmix, no PMIx", "mpich", topo(topology.Slurm, 2, 0), env("I_MPI_PMI_LIBRARY", "/usr/lib64/libpmix.so"), false},
		{"mpich under open mpi's mpirun", "mpich", topo(topology.OpenMPI, 2, orte|pmix), env(), false},
		{"mpich under torchrun", "mpich", topo(topology.Torchrun, 2, 0), env("RANK", "0"), false},
		{"mpich under torchrun under srun --mpi=pmi2", "mpich", topo(topology.Torchrun, 2, pmi2), env(), true},
		{"no MPI built", "", topo(topology.OpenMPI, 2, orte), env(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Offered(tc.built, tc.t, tc.getenv); got != tc.offered {
				t.Errorf("Offered = %v, want %v", got, tc.offered)
			}
			err := CheckWireUp(tc.built, tc.t, tc.getenv)
			if (err == nil) != tc.offered {
				t.Fatalf("CheckWireUp = %v, want an error: %v", err, !tc.offered)
			}
			var we *WorldError
			if err != nil && (!errors.As(err, &we) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "which this binary's MPI cannot join: ")) {
				t.Errorf("CheckWireUp = %q: want a one-line *WorldError", err)
			}
			// A world of one is an MPI singleton: always joinable.
			one := tc.t
			one.WorldSize, one.LocalWorldSize = 1, 1
			if !canWireUp(tc.built, one, tc.getenv) {
				t.Error("a world of one is not joinable")
			}
		})
	}
	// The message says what to do.
	err := CheckWireUp("openmpi", topo(topology.Slurm, 2, pmi2), env())
	if err == nil || !strings.Contains(err.Error(), "--mpi=pmix (Open MPI)") {
		t.Errorf("openmpi under srun --mpi=pmi2: %v", err)
	}
}
