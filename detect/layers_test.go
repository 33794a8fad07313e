package detect

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/batchkit/batchkit/topology"
)

// TestEveryLauncherHasALayer: detection has one row per launcher of
// topology.Launchers, and no row for a launcher without a traits row there
// (whose consumers would take it for an unknown one).
func TestEveryLauncherHasALayer(t *testing.T) {
	var rows []topology.Launcher
	for _, l := range layers {
		rows = append(rows, l.launcher)
	}
	want := slices.Clone(topology.Launchers)
	slices.Sort(want)
	slices.Sort(rows)
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("layers' launchers (-topology.Launchers +layers):\n%s", diff)
	}
}

// placementOnly compares Topology values without the launcher facts
// detection carries besides the placement (StepID, PMI, KillOnBadExit):
// the placement tables leave those to TestLauncherFacts.
var placementOnly = cmpopts.IgnoreFields(topology.Topology{}, "StepID", "PMI", "KillOnBadExit")

// facts are what detection reads from the launcher's variables for the
// consumers that would otherwise read them again.
type facts struct {
	Launcher      topology.Launcher
	StepID        string
	PMI           topology.PMI
	KillOnBadExit bool
}

// TestLauncherFacts: the step id names an srun step's launch only (an MPI
// launcher's ranks carry a stale daemon step's), and the torchrun layer
// that restates the step's rank (batchkit exec under srun); the PMI offered is the
// launcher's row and what the PMI variables say besides (srun --mpi, an
// MPI launcher under the torchrun it started); SLURM_KILL_BAD_EXIT counts
// as srun parses it (any integer but 0), and only under srun.
func TestLauncherFacts(t *testing.T) {
	step := srunTask("3", "0", "1", "4", "3,1", "2")
	pals := map[string]string{"PALS_RANKID": "9", "PMI_RANK": "9", "PMI_SIZE": "16", "PALS_LOCAL_RANKID": "1",
		"PMI_LOCAL_SIZE": "8", "PALS_NODEID": "1", "PALS_APID": "abc-123"}
	mvapich := map[string]string{"MV2_COMM_WORLD_RANK": "1", "MV2_COMM_WORLD_SIZE": "2",
		"MV2_COMM_WORLD_LOCAL_RANK": "1", "MV2_COMM_WORLD_LOCAL_SIZE": "2"}
	torchrun := map[string]string{"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
	kill := func(v string) map[string]string { return map[string]string{"SLURM_KILL_BAD_EXIT": v} }
	tests := []struct {
		name string
		env  topology.Getenv
		want facts
	}{
		{"nothing", env(), facts{Launcher: topology.Single}},
		{"the batch script", env(sbatchJob), facts{Launcher: topology.SlurmBatch}},
		{"srun step 0", env(step), facts{Launcher: topology.Slurm, StepID: "0"}},
		{"srun step 1", env(step, map[string]string{"SLURM_STEP_ID": "1"}), facts{Launcher: topology.Slurm, StepID: "1"}},
		{"srun --mpi=pmi2", env(step, map[string]string{"PMI_RANK": "3", "PMI_SIZE": "4", "PMI_FD": "5"}),
			facts{Launcher: topology.Slurm, StepID: "0", PMI: topology.OffersPMI2}},
		{"srun --mpi=pmix", env(step, map[string]string{"PMIX_RANK": "3", "PMIX_NAMESPACE": "slurm.pmix.7.0"}),
			facts{Launcher: topology.Slurm, StepID: "0", PMI: topology.OffersPMIx}},
		{"a step with Hydra's PMI_PORT only", env(step, map[string]string{"PMI_PORT": "node1:4711"}),
			facts{Launcher: topology.Slurm, StepID: "0", PMI: topology.OffersPMI2}},
		{"srun --kill-on-bad-exit=1", env(step, kill("1")), facts{Launcher: topology.Slurm, StepID: "0", KillOnBadExit: true}},
		{"SLURM_KILL_BAD_EXIT=2", env(step, kill("2")), facts{Launcher: topology.Slurm, StepID: "0", KillOnBadExit: true}},
		{"SLURM_KILL_BAD_EXIT=0", env(step, kill("0")), facts{Launcher: topology.Slurm, StepID: "0"}},
		{"SLURM_KILL_BAD_EXIT=yes", env(step, kill("yes")), facts{Launcher: topology.Slurm, StepID: "0"}},
		{"Open MPI's rank in its daemons' step", env(sbatchJob, ompiDaemonStep("0"), ompiRank("1", "1"), kill("1")),
			facts{Launcher: topology.OpenMPI, PMI: topology.OffersORTE | topology.OffersPMIx}},
		{"Open MPI without PMIX_RANK", env(ompiSkippedNodeJob, ompiSkippedNodeRank("0")),
			facts{Launcher: topology.OpenMPI, PMI: topology.OffersORTE}},
		{"Hydra inside a step of the job, told SLURM_KILL_BAD_EXIT",
			env(sbatchJob, map[string]string{"SLURM_STEP_ID": "1"}, hydraRank("1", "4", "1", "2"), kill("1")),
			facts{Launcher: topology.Hydra, PMI: topology.OffersPMI2}},
		{"Hydra -pmi-port mode", env(map[string]string{"PMI_ID": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2",
			"PMI_PORT": "node1:4711"}), facts{Launcher: topology.Hydra, PMI: topology.OffersPMI2}},
		{"MVAPICH2", env(mvapich), facts{Launcher: topology.MVAPICH, PMI: topology.OffersPMI2}},
		{"Cray PALS", env(pals), facts{Launcher: topology.PALS, PMI: topology.OffersPMI2}},
		{"torchrun under srun --mpi=pmi2 (batchkit exec)", env(step, map[string]string{"PMI_RANK": "3", "PMI_SIZE": "4"}, torchrun),
			facts{Launcher: topology.Torchrun, StepID: "0", PMI: topology.OffersPMI2}},
		{"torchrun under Open MPI's mpirun", env(ompiRank("3", "1"), torchrun, map[string]string{"LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "1"}),
			facts{Launcher: topology.Torchrun, PMI: topology.OffersORTE | topology.OffersPMIx}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.env, Options{Hostname: "vm"})
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			if diff := cmp.Diff(tt.want, facts{got.Launcher, got.StepID, got.PMI, got.KillOnBadExit}); diff != "" {
				t.Errorf("Detect (-want +got):\n%s", diff)
			}
		})
	}
}
