// Package detect decides which launcher started this process and returns its
// Topology. The launcher closest to the process wins:
//
//  1. torchrun contract (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK):
//     torchrun started by mpirun or srun, one per node, legitimately overrides them.
//     It must be consistent with the launcher below it (same rank and size, a
//     larger world, or a run id: nested), else the variables are stale and
//     detection fails.
//  2. an MPI launcher: Open MPI (OMPI_COMM_WORLD_*; PMIX_RANK must agree),
//     MVAPICH2 (MV2_COMM_WORLD_*), Cray PALS (PALS_*; PMI_RANK must agree),
//     MPICH / Intel MPI Hydra (PMI_RANK or PMI_ID, PMI_SIZE, MPI_LOCALRANKID,
//     MPI_LOCALNRANKS), bare PMIx (PMIX_RANK).
//  3. a Slurm srun step (SLURM_STEP_ID set): SLURM_PROCID, SLURM_NTASKS, ...
//  4. the Slurm batch script (SLURM_JOB_ID without a step): rank 0 of 1, or
//     with Options.Allocation the shape of the allocation.
//  5. nothing: one local process.
//
// Slurm's per-step variables count only when no MPI launcher variables are
// present: an mpirun inside an allocation starts its daemons through a Slurm
// step of its own, so every rank carries that step's SLURM_PROCID (the node
// index), SLURM_NTASKS and SLURM_LOCALID=0, which are stale. The exception is
// `srun --mpi=pmi2|pmix`, which sets PMI_RANK/PMIX_RANK but no node-local
// variables: there Slurm is the launcher, and the PMI values must agree with
// Slurm's or detection fails. Job-level Slurm variables (SLURM_JOB_ID,
// SLURM_JOB_NODELIST) stay true under any launcher and supply the job id and
// host list to the MPI layers; the MPI layout places the rank on them, and
// the daemons' SLURM_NODEID only when the layout cannot tell.
//
// MASTER_ADDR and MASTER_PORT, when set, win in every layer. Otherwise
// MASTER_ADDR is the first host of the node list (the srun step's, or the job's),
// 127.0.0.1 when every rank is on this node, and unknown otherwise; the port
// is topology.PortForJob of the job id.
package detect

import (
	"fmt"

	"github.com/batchkit/batchkit/envsetup/envvars"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/slurm"
	"github.com/batchkit/batchkit/topology"
)

// Options are the inputs that do not come from the environment.
type Options struct {
	// Allocation makes the batch script report the allocation's shape
	// instead of a single process.
	Allocation bool
	// Hostname is this host's name, used as the host list when every rank
	// runs here and no launcher names the hosts.
	Hostname string
}

var torchrunLayer = struct {
	rank, size, localRank, localSize, nodeRank, numNodes []string
}{
	rank:      []string{envvars.Rank},
	size:      []string{envvars.WorldSize},
	localRank: []string{envvars.LocalRank},
	localSize: []string{envvars.LocalWorldSize},
	nodeRank:  []string{envvars.GroupRank, envvars.NodeRank},
	numNodes:  []string{envvars.GroupWorldSize},
}

// Detect returns the Topology of this process. Errors are one line and name
// the variable and value at fault.
func Detect(getenv topology.Getenv, opts Options) (topology.Topology, error) {
	t, err := detect(getenv, opts)
	if err != nil {
		return topology.Topology{}, err
	}
	if err := finish(getenv, opts, &t); err != nil {
		return topology.Topology{}, err
	}
	if err := t.Validate(); err != nil {
		return topology.Topology{}, fmt.Errorf("%s environment: %w", t.Launcher, err)
	}
	return t, nil
}

func detect(getenv topology.Getenv, opts Options) (topology.Topology, error) {
	if p, ok, err := fromTorchrun(getenv); ok || err != nil {
		if err != nil {
			return topology.Topology{}, err
		}
		if err := checkSizes(p); err != nil {
			return topology.Topology{}, err
		}
		if err := checkOuter(getenv, p); err != nil {
			return topology.Topology{}, err
		}
		return fromPartial(p), nil
	}
	p, ok, err := mpirun.Detect(getenv)
	if err != nil {
		return topology.Topology{}, err
	}
	if ok {
		if p.PMIOnly && slurm.InStep(getenv) {
			return slurmWithPMI(getenv, p)
		}
		if err := p.Require(); err != nil {
			return topology.Topology{}, err
		}
		if err := checkSizes(p); err != nil {
			return topology.Topology{}, err
		}
		return fromPartial(p), nil
	}
	if t, ok, err := slurm.StepTopology(getenv); ok || err != nil {
		return t, err
	}
	if t, ok, err := slurm.BatchTopology(getenv, opts.Allocation); ok || err != nil {
		return t, err
	}
	return topology.Topology{Launcher: topology.Single, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1}, nil
}

func fromTorchrun(getenv topology.Getenv) (mpirun.Partial, bool, error) {
	l := torchrunLayer
	marker := topology.AnySet(getenv, envvars.Rank, envvars.WorldSize, envvars.LocalRank, envvars.LocalWorldSize)
	if marker == "" {
		return mpirun.Partial{}, false, nil
	}
	p := mpirun.Partial{Launcher: topology.Torchrun, MarkerVar: marker, Marker: getenv(marker)}
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
		v, err := topology.Int(getenv, topology.Torchrun, f.what, f.names...)
		if err != nil {
			return p, true, err
		}
		if !v.Set() && f.what != "node rank" && f.what != "number of nodes" {
			return p, true, &topology.IncompleteError{
				Launcher: topology.Torchrun, Have: p.MarkerVar, HaveValue: p.Marker, MissingAny: f.names}
		}
		*f.dst = v
	}
	p.JobID = getenv(envvars.RunID)
	return p, true, nil
}

// checkSizes rejects what no launcher sets: a size of 0, a rank outside its
// size. It names the variable, and it runs before placement divides by the
// sizes.
func checkSizes(p mpirun.Partial) error {
	for _, v := range []topology.Value{p.WorldSize, p.LocalWorldSize, p.NumNodes} {
		if v.Set() && v.N < 1 {
			return &topology.VarError{Var: v.Var, Value: v.Raw, Msg: "a size must be at least 1"}
		}
	}
	for _, c := range []struct {
		v, of topology.Value
		what  string
		of1   string // of's value in words, %d its value
		le    bool   // v may equal of: a count, not an index
	}{
		{p.Rank, p.WorldSize, "rank", "world size %d", false},
		{p.LocalRank, p.LocalWorldSize, "local rank", "world size %d", false},
		{p.LocalWorldSize, p.WorldSize, "local world size", "world size %d", true},
		{p.NodeRank, p.NumNodes, "node rank", "%d nodes", false},
		{p.NumNodes, p.WorldSize, "number of nodes", "world size %d", true},
	} {
		if !c.v.Set() || !c.of.Set() || c.v.N < c.of.N || (c.le && c.v.N == c.of.N) {
			continue
		}
		return &topology.VarError{Var: c.v.Var, Value: c.v.Raw,
			Msg: fmt.Sprintf("%s %d out of range for %s (%s=%s)", c.what, c.v.N, fmt.Sprintf(c.of1, c.of.N), c.of.Var, c.of.Raw)}
	}
	return nil
}

// staleHint is the likely cause when torchrun variables contradict the
// launcher: an `eval "$(batchkit env --format shell)"` or an outer torchrun
// left them in the environment the real launcher passes on.
const staleHint = "torchrun variables left from an outer job? unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE before launching"

// checkOuter cross-checks the torchrun variables against another launcher
// that claims this process (an MPI launcher, else an srun step; its stale
// variables under an mpirun are never consulted). torchrun wins only when
// that is consistent: a run id says a real torchrun or batchkit run set
// them, both agree (batchkit exec under srun or mpirun sets both), or
// torchrun's world is larger (each outer task spawned its own workers).
func checkOuter(getenv topology.Getenv, p mpirun.Partial) error {
	// torchrun and batchkit run set a run id: their variables are a real
	// inner launcher's (one per node under srun or mpirun, say, where its
	// ranks need not match the outer ones), not an outer job's leftovers.
	if getenv(envvars.RunID) != "" {
		return nil
	}
	outer, rank, size, ok, err := outerLayer(getenv)
	if err != nil || !ok {
		return err
	}
	if size.N < 1 {
		return &topology.VarError{Var: size.Var, Value: size.Raw, Msg: "a size must be at least 1"}
	}
	if (rank.N == p.Rank.N && size.N == p.WorldSize.N) || p.WorldSize.N > size.N {
		return nil
	}
	return &topology.LayerConflictError{Inner: topology.Torchrun, Outer: outer,
		InnerRank: p.Rank, InnerSize: p.WorldSize, OuterRank: rank, OuterSize: size, Resolution: staleHint}
}

// outerLayer returns the rank and world size of the launcher under the
// torchrun layer, by the same precedence as detect: an MPI launcher, but
// srun --mpi=pmi2/pmix is Slurm. ok is false when none gives both.
func outerLayer(getenv topology.Getenv) (l topology.Launcher, rank, size topology.Value, ok bool, err error) {
	p, ok, err := mpirun.Detect(getenv)
	if err != nil {
		return l, rank, size, false, err
	}
	if ok && !(p.PMIOnly && slurm.InStep(getenv)) {
		return p.Launcher, p.Rank, p.WorldSize, p.Rank.Set() && p.WorldSize.Set(), nil
	}
	rank, size, ok, err = slurm.StepRank(getenv)
	return topology.Slurm, rank, size, ok, err
}

// slurmWithPMI handles srun --mpi=pmi2/pmix: Slurm is the launcher, and the
// PMI rank and size must agree with it.
func slurmWithPMI(getenv topology.Getenv, p mpirun.Partial) (topology.Topology, error) {
	t, _, err := slurm.StepTopology(getenv)
	if err != nil {
		return t, err
	}
	if p.Rank.Set() && p.Rank.N != t.Rank {
		return t, &topology.ConflictError{What: "rank", Launcher: topology.Slurm,
			A: "SLURM_PROCID", AValue: getenv("SLURM_PROCID"), B: p.Rank.Var, BValue: p.Rank.Raw}
	}
	if p.WorldSize.Set() && p.WorldSize.N != t.WorldSize {
		return t, &topology.ConflictError{What: "world size", Launcher: topology.Slurm,
			A: "SLURM_NTASKS", AValue: fmt.Sprint(t.WorldSize), B: p.WorldSize.Var, BValue: p.WorldSize.Raw}
	}
	return t, nil
}

func fromPartial(p mpirun.Partial) topology.Topology {
	t := topology.Topology{
		Launcher:       p.Launcher,
		Rank:           p.Rank.N,
		WorldSize:      p.WorldSize.N,
		LocalRank:      p.LocalRank.N,
		LocalWorldSize: p.LocalWorldSize.N,
		NodeRank:       -1,
		NumNodes:       -1,
		JobID:          p.JobID,
	}
	if p.NodeRank.Set() {
		t.NodeRank = p.NodeRank.N
	}
	if p.NumNodes.Set() {
		t.NumNodes = p.NumNodes.N
	}
	return t
}
