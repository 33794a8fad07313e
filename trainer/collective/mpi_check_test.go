package collective

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
			err := checkMPIWorld(tc.built, tc.mpiRank, tc.mpiSize, tc.t)
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
		var err error = newMPIError(tc.call, 17, tc.class, tc.msg)
		if got := err.Error(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
		var me *MPIError
		if !errors.As(err, &me) || me.Call != tc.call || me.Code != 17 {
			t.Errorf("errors.As: %#v", me)
		}
	}
}
