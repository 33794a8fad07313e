package topology

// The launchers: each one's name and a traits row, what the rest of
// batchkit needs to know of it. Which variables say a launcher started a
// process, and what they say, is package detect's row (detect/layers.go),
// the only place that reads them; everything a consumer asks of "the
// launcher" is answered here or in the Topology detect fills, so that no
// other package keeps a switch over launchers or reads their variables.
// Adding a launcher is its constant and row here, its row in detect's
// layers (with its fixtures) and its line in docs/reference/precedence.md's table.

// Launcher names the layer a Topology was read from. It is a closed set:
// Launchers.
type Launcher string

const (
	Single     Launcher = "single"      // no launcher: one local process
	Torchrun   Launcher = "torchrun"    // torchrun / torch.distributed.run, or batchkit run
	Slurm      Launcher = "slurm"       // a task of an srun step
	SlurmBatch Launcher = "slurm-batch" // the sbatch batch script itself (not a task)
	OpenMPI    Launcher = "openmpi"     // Open MPI mpirun/prterun
	Hydra      Launcher = "hydra"       // MPICH / Intel MPI Hydra (mpiexec.hydra)
	MVAPICH    Launcher = "mvapich"     // MVAPICH2 mpirun_rsh / mpiexec
	PMIx       Launcher = "pmix"        // a bare PMIx server (prterun, srun --mpi=pmix)
	PALS       Launcher = "pals"        // HPE Cray PALS (aprun/mpiexec on Shasta)
)

// PMI is a set of process-management interfaces: the ways a launcher lets
// an MPI library's MPI_Init find the other ranks. Which library can join
// which launcher follows from it (trainer/collective/mpi): Open MPI speaks
// PMIx and its own runtime, MPICH and Intel MPI the PMI-1/PMI-2 wire
// protocol (Intel MPI PMIx too, when pointed at libpmix).
type PMI uint8

const (
	// OffersPMI2 is the PMI-1/PMI-2 wire protocol (PMI_FD, PMI_PORT):
	// Hydra, MVAPICH2's launchers, Cray PALS, srun --mpi=pmi2.
	OffersPMI2 PMI = 1 << iota
	// OffersPMIx is a PMIx server (PMIX_RANK): PRRTE's prterun, srun
	// --mpi=pmix. Open MPI's mpirun runs one for its ranks too, which
	// their PMIX_RANK says.
	OffersPMIx
	// OffersORTE is Open MPI's own runtime (ORTE, PRRTE in Open MPI 5),
	// which only Open MPI joins.
	OffersORTE
)

// Pin is what per-rank pinning (envsetup.Pinning) needs of a launcher.
type Pin struct {
	// BindsRanks: the launcher binds each rank to a CPU mask of its own
	// by default (Open MPI and Intel MPI pin their ranks), so the rank's
	// affinity mask is its slice, not the node's to divide.
	BindsRanks bool
	// AppliesPinDomain: the launcher applies Intel MPI's I_MPI_PIN_DOMAIN
	// before the rank exists (Hydra), so the rank setting it is too late;
	// the value given to the launcher governs.
	AppliesPinDomain bool
	// HydraLocalRanks: the launcher sets Hydra's MPI_LOCALRANKID and
	// MPI_LOCALNRANKS, which oneCCL's hydra process launcher reads;
	// elsewhere oneCCL is given the local rank and size (none).
	HydraLocalRanks bool
}

// Traits are what the rest of batchkit needs to know of a launcher: one
// row per launcher in traits. The zero value assumes nothing (an unknown
// launcher): it stops its job, offers no PMI, binds nothing.
type Traits struct {
	// LeavesRanksRunning: when a rank exits non-zero, in MPI_Init or not
	// (a PyTorch gloo rank never calls it), the launcher lets the other
	// ranks run on, so batchkit exec watches them (launch/failfast). The
	// rows say why, from the launchers' sources.
	LeavesRanksRunning bool
	// PMI is what the launcher itself offers its ranks. srun offers one
	// only when told (--mpi=pmi2/pmix): detect reads that from the
	// variables into Topology.PMI, which is what consumers ask.
	PMI PMI
	Pin Pin
}

// traits is one row per launcher, in the order of the constants.
var traits = []struct {
	Launcher
	Traits
}{
	{Single, Traits{}}, // one process: nothing to stop, nobody to join
	// torchrun and batchkit run stop the other workers when one fails
	// (torch.distributed.elastic's agent; launch/local's supervisor).
	{Torchrun, Traits{}},
	{Slurm, Traits{
		// srun lets the others run on unless given --kill-on-bad-exit=1
		// or KillOnBadExit=1 is in slurm.conf (default 0;
		// docs/slurm-observed.md). Neither shows in the tasks'
		// environment, but SLURM_KILL_BAD_EXIT=1, the flag as a
		// variable, does (batchkit's own srun lines set it), and then the
		// step is not watched (launch/failfast's needsWatch). A user's
		// `srun batchkit exec` is.
		LeavesRanksRunning: true,
	}},
	{SlurmBatch, Traits{}}, // the batch script is one process
	{OpenMPI, Traits{
		// Open MPI's mpirun stops the job.
		PMI: OffersORTE,
		Pin: Pin{BindsRanks: true},
	}},
	{Hydra, Traits{
		// Hydra (MPICH, Intel MPI) kills the job only when a rank that
		// opened its PMI connection dies (hydra pm/pmiserv/pmip_cb.c):
		// the others run on. Measured for Intel MPI 2021.18's
		// mpiexec.hydra too (the wheel): after a rank's exit 3 or SIGKILL
		// the others ran to their end (30 s), Hydra reporting only then
		// (integration TestFailFast's intelmpi rows).
		LeavesRanksRunning: true,
		PMI:                OffersPMI2,
		Pin:                Pin{BindsRanks: true, AppliesPinDomain: true, HydraLocalRanks: true},
	}},
	{MVAPICH, Traits{
		// mpirun_rsh ends the job on any non-zero exit (mpispawn.c
		// child_handler reports it, wfe_mpirun.c fails the run,
		// mpirun_rsh.c cleans up), but MVAPICH2's mpiexec is Hydra and
		// sets the same MV2_COMM_WORLD_* variables: watched, redundantly
		// under mpirun_rsh. github.com/kumattau/mvapich2 (2.3.7-1)
		// src/pm/mpirun, src/pm/hydra.
		LeavesRanksRunning: true,
		PMI:                OffersPMI2,
		Pin:                Pin{BindsRanks: true},
	}},
	{PMIx, Traits{
		// PRRTE's prterun (bare PMIx): a non-zero exit is an error by
		// default (state_base_frame.c error_non_zero_exit = true) and
		// errmgr_dvm.c terminates the job. github.com/openpmix/prrte.
		PMI: OffersPMIx,
		Pin: Pin{BindsRanks: true},
	}},
	{PALS, Traits{
		// Cray PALS mpiexec: --abort-on-failure is on by default
		// (github.com/Cray-HPE/craycli cray/modules/mpiexec/cli.py).
		PMI: OffersPMI2,
		Pin: Pin{BindsRanks: true},
	}},
}

// Launchers lists every launcher, in the order of the constants.
var Launchers = func() []Launcher {
	out := make([]Launcher, len(traits))
	for i, r := range traits {
		out[i] = r.Launcher
	}
	return out
}()

// Traits returns l's row; the zero Traits for a name that is no launcher.
func (l Launcher) Traits() Traits {
	for _, r := range traits {
		if r.Launcher == l {
			return r.Traits
		}
	}
	return Traits{}
}
