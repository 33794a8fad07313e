package detect

import (
	"slices"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/topology"
)

// vars are the variables one count is read from: groups in order of
// preference. The first group with a variable set wins, and the variables
// set inside it are aliases that must agree. Most counts have one group;
// Slurm's task count prefers the step's own (SLURM_STEP_NUM_TASKS) to the
// job's aliases (SLURM_NTASKS, SLURM_NPROCS), which legitimately differ.
type vars [][]string

// aliases is one group of aliases: the usual case.
func aliases(names ...string) vars { return vars{names} }

// layer is one launcher's environment contract, as data: the variables that
// say it started this process and those each field is read from. Adding a
// launcher is adding a row; docs/reference/precedence.md's "Which launcher
// wins" table says the same (TestPrecedenceTable).
type layer struct {
	launcher topology.Launcher
	// identify says the launcher started this process: every group has a
	// variable set (any one of the group). No group: it always matches.
	// The first set variable of the first group is the one errors quote.
	identify [][]string
	// The counts. A layer without a rank variable runs no ranks: it is one
	// process, rank 0 of 1 (the batch script, or nothing).
	rank, size, localRank, localSize vars
	nodeRank, numNodes               vars     // when unset, placement derives them (place.go)
	jobID                            []string // first set wins; a Slurm job's id wins over it (finish)
	// stepID names the launch inside its job (Topology.StepID), first
	// set wins.
	stepID []string
	// killOnBadExit: the first set, an integer but 0 (as srun parses
	// it), says the launcher was told to end the job when a rank fails
	// (Topology.KillOnBadExit).
	killOnBadExit []string
	// Slurm's layers describe the nodes as lists, the first variable set
	// wins: the node list, and the tasks on each node, whose entry at the
	// node rank is the local size and whose length is the node count
	// (slurm.Shape cross-checks them with the counts above).
	hosts, tasksPerNode []string
	// nests: the layer may be started by another launcher's task, and
	// wins only when consistent with it (checkOuter).
	nests bool
	// srunPMI marks the PMI layers that srun --mpi=pmi2/pmix imitates; see
	// srunPMI.
	srunPMI bool
}

// Slurm's variables, shared by its two layers and by the job-level facts
// every layer uses (finish). Aliases are older names Slurm still exports.
var (
	slurmJobID    = []string{"SLURM_JOB_ID", "SLURM_JOBID"}
	slurmStepID   = []string{"SLURM_STEP_ID", "SLURM_STEPID"}
	slurmJobNodes = []string{"SLURM_JOB_NODELIST", "SLURM_NODELIST"}
	slurmNTasks   = []string{"SLURM_NTASKS", "SLURM_NPROCS"}
	slurmJobNum   = []string{"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}
)

// layers in the order they are tried: the launcher closest to the process
// first. Three rules read these rows beyond "first match wins":
//   - torchrun nests: its row wins only when consistent with the next
//     matching row (checkOuter).
//   - srun --mpi=pmi2/pmix sets a PMI layer's rank and size but no
//     node-local variable: there the Slurm step is the launcher and the PMI
//     values must agree with it (srunPMI, slurmWithPMI).
//   - an MPI launcher inside an allocation starts its daemons in a Slurm
//     step of their own, so its ranks carry that step's stale per-step
//     variables: the MPI rows come first, and the step is consulted only to
//     place a rank on a node the MPI layout cannot tell (daemonNode).
//
// Open MPI comes before the PMI-based rows: an Open MPI rank also carries
// PMIX_RANK, and a Cray PALS rank PMI_RANK, so each is recognised by the
// variables only it sets.
var layers = []layer{
	{
		launcher:  topology.Torchrun,
		identify:  [][]string{{envvars.Rank, envvars.WorldSize, envvars.LocalRank, envvars.LocalWorldSize}},
		rank:      aliases(envvars.Rank),
		size:      aliases(envvars.WorldSize),
		localRank: aliases(envvars.LocalRank),
		localSize: aliases(envvars.LocalWorldSize),
		nodeRank:  aliases(envvars.GroupRank, envvars.NodeRank),
		numNodes:  aliases(envvars.GroupWorldSize),
		jobID:     []string{envvars.RunID},
		nests:     true,
	},
	{
		launcher:  topology.OpenMPI,
		identify:  [][]string{{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}},
		rank:      aliases("OMPI_COMM_WORLD_RANK", "PMIX_RANK"),
		size:      aliases("OMPI_COMM_WORLD_SIZE"),
		localRank: aliases("OMPI_COMM_WORLD_LOCAL_RANK"),
		localSize: aliases("OMPI_COMM_WORLD_LOCAL_SIZE"),
		// OMPI_COMM_WORLD_NODE_RANK is NOT the node index (it is a rank
		// among the node's processes across jobs); Open MPI 4 does export
		// the node count.
		numNodes: aliases("OMPI_MCA_orte_num_nodes"),
		jobID:    []string{"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"},
	},
	{
		launcher:  topology.MVAPICH,
		identify:  [][]string{{"MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"}},
		rank:      aliases("MV2_COMM_WORLD_RANK"),
		size:      aliases("MV2_COMM_WORLD_SIZE"),
		localRank: aliases("MV2_COMM_WORLD_LOCAL_RANK"),
		localSize: aliases("MV2_COMM_WORLD_LOCAL_SIZE"),
		numNodes:  aliases(envvars.NumNodes),
		jobID:     []string{"MPIRUN_ID"},
	},
	{
		launcher:  topology.PALS,
		identify:  [][]string{{"PALS_RANKID", "PALS_APID"}},
		rank:      aliases("PALS_RANKID", "PMI_RANK"),
		size:      aliases("PMI_SIZE"),
		localRank: aliases("PALS_LOCAL_RANKID", "PMI_LOCAL_RANK"),
		localSize: aliases("PALS_LOCAL_SIZE", "PMI_LOCAL_SIZE"),
		nodeRank:  aliases("PALS_NODEID"),
		jobID:     []string{"PALS_APID"},
	},
	{
		// MPICH and Intel MPI Hydra. In -pmi-port mode Hydra sets PMI_ID
		// instead of PMI_RANK.
		launcher:  topology.Hydra,
		identify:  [][]string{{"MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_RANK", "PMI_ID"}},
		rank:      aliases("PMI_RANK", "PMI_ID"),
		size:      aliases("PMI_SIZE"),
		localRank: aliases("MPI_LOCALRANKID"),
		localSize: aliases("MPI_LOCALNRANKS"),
		numNodes:  aliases(envvars.NumNodes),
		jobID:     []string{"PMI_KVSNAME"},
		srunPMI:   true,
	},
	{
		// A bare PMIx server (prterun without Open MPI's variables). PMIx
		// puts no size in the environment, so this layer is complete only
		// under srun --mpi=pmix, where Slurm gives it; else detection says
		// it is incomplete.
		launcher: topology.PMIx,
		identify: [][]string{{"PMIX_RANK"}},
		rank:     aliases("PMIX_RANK"),
		jobID:    []string{"PMIX_NAMESPACE"},
		srunPMI:  true,
	},
	slurmStep,
	{
		// The batch script (or an salloc shell): a process of the job that
		// is not one of its tasks, though it has SLURM_PROCID=0 and the
		// job's SLURM_NTASKS. Rank 0 of 1; with Options.Allocation, the
		// shape a step of all the job's tasks would have (allocation).
		launcher:     topology.SlurmBatch,
		identify:     [][]string{slurmJobID},
		size:         aliases(slurmNTasks...),
		numNodes:     aliases(slurmJobNum...),
		jobID:        slurmJobID,
		hosts:        slurmJobNodes,
		tasksPerNode: []string{"SLURM_TASKS_PER_NODE"},
	},
	{launcher: topology.Single},
}

// slurmStep is a task of an srun step. The batch script has SLURM_PROCID=0
// too, but no step id: it is not a task.
var slurmStep = layer{
	launcher:  topology.Slurm,
	identify:  [][]string{slurmStepID, slurmJobID},
	rank:      aliases("SLURM_PROCID"),
	size:      vars{{"SLURM_STEP_NUM_TASKS"}, slurmNTasks},
	localRank: aliases("SLURM_LOCALID"),
	nodeRank:  aliases("SLURM_NODEID"),
	numNodes:  vars{{"SLURM_STEP_NUM_NODES"}, slurmJobNum},
	jobID:     slurmJobID,
	stepID:    slurmStepID,
	// srun's --kill-on-bad-exit as a variable, which srun reads and passes
	// on to the tasks: batchkit's own srun lines set it.
	killOnBadExit: []string{envvars.SlurmKillBadExit},
	// The step's own lists first: a step may run on part of the job.
	hosts:        append([]string{"SLURM_STEP_NODELIST"}, slurmJobNodes...),
	tasksPerNode: []string{"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"},
}

// pmiVars are the variables whose presence says a process-management
// interface is offered whatever the launcher's row (Topology.PMI):
// srun --mpi=pmi2 or --mpi=pmix, whose tasks are Slurm's, or an MPI
// launcher under the torchrun or batchkit exec it started. Any one of a
// row's variables set counts.
var pmiVars = []struct {
	pmi  topology.PMI
	vars []string
}{
	{topology.OffersPMI2, []string{"PMI_RANK", "PMI_FD", "PMI_PORT"}}, // Hydra's -pmi-port mode: PMI_PORT
	{topology.OffersPMIx, []string{"PMIX_RANK"}},
	{topology.OffersORTE, []string{"OMPI_COMM_WORLD_SIZE"}},
}

// offeredPMI is launcher l's interfaces and those pmiVars say are there.
func offeredPMI(getenv topology.Getenv, l topology.Launcher) topology.PMI {
	pmi := l.Traits().PMI
	for _, r := range pmiVars {
		if topology.AnySet(getenv, r.vars...) != "" {
			pmi |= r.pmi
		}
	}
	return pmi
}

// identified reports whether l's identifying variables are set.
func (l layer) identified(getenv topology.Getenv) bool {
	for _, group := range l.identify {
		if topology.AnySet(getenv, group...) == "" {
			return false
		}
	}
	return true
}

// marker is the variable errors quote as the sign that l started us.
func (l layer) marker(getenv topology.Getenv) (name, value string) {
	if len(l.identify) == 0 {
		return "", ""
	}
	name = topology.AnySet(getenv, l.identify[0]...)
	return name, getenv(name)
}

// match returns the first of rows that started this process. rows always
// ends with the Single row, which matches anything.
func match(getenv topology.Getenv, rows []layer) layer {
	for _, l := range rows {
		if l.identified(getenv) {
			return l
		}
	}
	return layers[len(layers)-1]
}

// srunPMI is the rule for srun --mpi=pmi2/pmix: it sets a PMI layer's rank
// (PMI_RANK, PMI_SIZE; or PMIX_RANK) but none of the node-local variables
// a real Hydra or PMIx launcher sets. Inside an srun step such a layer is
// Slurm's, and Slurm's SLURM_LOCALID, SLURM_NODEID and tasks-per-node
// place the rank.
func srunPMI(getenv topology.Getenv, l layer) bool {
	return pmiOnly(getenv, l) && slurmStep.identified(getenv)
}

// pmiOnly reports whether l is a PMI layer without node-local variables.
func pmiOnly(getenv topology.Getenv, l layer) bool {
	return l.srunPMI && topology.AnySet(getenv, flat(l.localRank)...) == ""
}

// below returns the rows tried after launcher l's.
func below(l topology.Launcher) []layer {
	i := slices.IndexFunc(layers, func(x layer) bool { return x.launcher == l })
	return layers[i+1:]
}

// flat lists every variable of v, in order.
func flat(v vars) []string {
	var out []string
	for _, group := range v {
		out = append(out, group...)
	}
	return out
}
