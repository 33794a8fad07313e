package mpirun

import (
	"github.com/batchkit/batchkit/envsetup/envvars"
	"github.com/batchkit/batchkit/topology"
)

// layer is one MPI launcher's environment contract, as data: the variables
// that carry each quantity, aliases first-wins and cross-checked. Adding a
// launcher is adding a row.
type layer struct {
	launcher  topology.Launcher
	markers   []string // any of these set means the launcher started us
	rank      []string
	size      []string
	localRank []string
	localSize []string
	nodeRank  []string // optional: most launchers do not say which node
	numNodes  []string // optional
	jobID     []string // optional: shared by all ranks of one launch
}

// layers in the order they are tried. Open MPI before the PMI-based ones:
// an Open MPI rank also carries PMIX_RANK, and a Cray PALS rank carries
// PMI_RANK, so each is recognised by the variables only it sets.
var layers = []layer{
	{
		launcher:  topology.OpenMPI,
		markers:   []string{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
		rank:      []string{"OMPI_COMM_WORLD_RANK", "PMIX_RANK"},
		size:      []string{"OMPI_COMM_WORLD_SIZE"},
		localRank: []string{"OMPI_COMM_WORLD_LOCAL_RANK"},
		localSize: []string{"OMPI_COMM_WORLD_LOCAL_SIZE"},
		// OMPI_COMM_WORLD_NODE_RANK is NOT the node index (it is a rank
		// among the node's processes across jobs); Open MPI 4 does export
		// the node count.
		numNodes: []string{"OMPI_MCA_orte_num_nodes"},
		jobID:    []string{"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"},
	},
	{
		launcher:  topology.MVAPICH,
		markers:   []string{"MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"},
		rank:      []string{"MV2_COMM_WORLD_RANK"},
		size:      []string{"MV2_COMM_WORLD_SIZE"},
		localRank: []string{"MV2_COMM_WORLD_LOCAL_RANK"},
		localSize: []string{"MV2_COMM_WORLD_LOCAL_SIZE"},
		numNodes:  []string{envvars.NumNodes},
		jobID:     []string{"MPIRUN_ID"},
	},
	{
		launcher:  topology.PALS,
		markers:   []string{"PALS_RANKID", "PALS_APID"},
		rank:      []string{"PALS_RANKID", "PMI_RANK"},
		size:      []string{"PMI_SIZE"},
		localRank: []string{"PALS_LOCAL_RANKID", "PMI_LOCAL_RANK"},
		localSize: []string{"PALS_LOCAL_SIZE", "PMI_LOCAL_SIZE"},
		nodeRank:  []string{"PALS_NODEID"},
		jobID:     []string{"PALS_APID"},
	},
	{
		// MPICH and Intel MPI Hydra. In -pmi-port mode Hydra sets PMI_ID
		// instead of PMI_RANK.
		launcher:  topology.Hydra,
		markers:   []string{"MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_RANK", "PMI_ID"},
		rank:      []string{"PMI_RANK", "PMI_ID"},
		size:      []string{"PMI_SIZE"},
		localRank: []string{"MPI_LOCALRANKID"},
		localSize: []string{"MPI_LOCALNRANKS"},
		numNodes:  []string{envvars.NumNodes},
		jobID:     []string{"PMI_KVSNAME"},
	},
	{
		// A bare PMIx server (prterun without Open MPI's variables). PMIx
		// puts no size in the environment, so this layer is complete only
		// when something else supplies one; detect reports that clearly.
		launcher: topology.PMIx,
		markers:  []string{"PMIX_RANK"},
		rank:     []string{"PMIX_RANK"},
		jobID:    []string{"PMIX_NAMESPACE"},
	},
}

// Partial is what an MPI launcher told us before host information is
// applied: rank, sizes, and the optional node facts.
type Partial struct {
	Launcher          topology.Launcher
	Rank, WorldSize   topology.Value
	LocalRank         topology.Value
	LocalWorldSize    topology.Value
	NodeRank          topology.Value
	NumNodes          topology.Value
	JobID             string
	PMIOnly           bool // Hydra/PMIx variables without node-local ones: srun --mpi=pmi2/pmix
	MarkerVar, Marker string
}

// Detect returns the variables of the innermost MPI launcher that started
// this process, or ok=false when none did. It does not validate
// completeness: the caller decides, since a PMI-only environment inside an
// srun step is Slurm's, not a launcher's.
func Detect(getenv topology.Getenv) (p Partial, ok bool, err error) {
	for _, l := range layers {
		marker := topology.AnySet(getenv, l.markers...)
		if marker == "" {
			continue
		}
		p = Partial{Launcher: l.launcher, MarkerVar: marker, Marker: getenv(marker)}
		for _, f := range []struct {
			dst   *topology.Value
			what  string
			names []string
		}{
			{&p.Rank, "rank", l.rank},
			{&p.WorldSize, "world size", l.size},
			{&p.LocalRank, "local rank", l.localRank},
			{&p.LocalWorldSize, "local world size", l.localSize},
			{&p.NodeRank, "node rank", l.nodeRank},
			{&p.NumNodes, "number of nodes", l.numNodes},
		} {
			if *f.dst, err = topology.Int(getenv, l.launcher, f.what, f.names...); err != nil {
				return p, true, err
			}
		}
		p.JobID = topology.FirstString(getenv, l.jobID...)
		p.PMIOnly = (l.launcher == topology.Hydra || l.launcher == topology.PMIx) && !p.LocalRank.Set()
		return p, true, nil
	}
	return p, false, nil
}

// Require returns an IncompleteError unless rank, world size, local rank and
// local world size are all known.
func (p Partial) Require() error {
	l := layerOf(p.Launcher)
	for _, f := range []struct {
		v     topology.Value
		names []string
	}{
		{p.Rank, l.rank}, {p.WorldSize, l.size}, {p.LocalRank, l.localRank}, {p.LocalWorldSize, l.localSize},
	} {
		if !f.v.Set() {
			missing := f.names
			if len(missing) == 0 {
				missing = []string{"a world size variable"}
			}
			return &topology.IncompleteError{Launcher: p.Launcher, Have: p.MarkerVar, HaveValue: p.Marker, MissingAny: missing}
		}
	}
	return nil
}

func layerOf(l topology.Launcher) layer {
	for _, x := range layers {
		if x.launcher == l {
			return x
		}
	}
	return layer{}
}
