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

// detect reads the first layer that started this process (layers.go),
// by the rules listed there.
func detect(getenv topology.Getenv, opts Options) (topology.Topology, error) {
	l := match(getenv, layers)
	switch {
	case srunPMI(getenv, l):
		return slurmWithPMI(getenv, l)
	case l.rank == nil && opts.Allocation && l.tasksPerNode != nil:
		return allocation(getenv, l)
	case l.rank == nil:
		return oneProcess(getenv, l)
	}
	p, err := ranks(getenv, l)
	if err != nil {
		return topology.Topology{}, err
	}
	if l.nests {
		if err := checkOuter(getenv, p); err != nil {
			return topology.Topology{}, err
		}
	}
	return fromPartial(p), nil
}

// ranks reads a layer that runs ranks: its counts, complete and in range,
// and where it lists them (Slurm) its hosts and tasks per node.
func ranks(getenv topology.Getenv, l layer) (partial, error) {
	p, err := readCounts(getenv, l)
	if err != nil {
		return p, err
	}
	if err := l.require(p); err != nil {
		return p, err
	}
	if err := checkPositive(p); err != nil {
		return p, err
	}
	if l.tasksPerNode != nil {
		if err := layout(getenv, l, &p); err != nil {
			return p, err
		}
	}
	return p, checkRanges(p)
}

// oneProcess is a layer that runs no ranks: rank 0 of 1, on the first of
// its hosts (the batch script runs on the allocation's first node).
func oneProcess(getenv topology.Getenv, l layer) (topology.Topology, error) {
	t := topology.Topology{Launcher: l.launcher, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1,
		JobID: topology.FirstString(getenv, l.jobID...)}
	hosts, err := readHosts(getenv, l.hosts)
	if len(hosts) > 0 {
		t.Hosts = hosts[:1]
	}
	return t, err
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
func checkOuter(getenv topology.Getenv, p partial) error {
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
	if (rank.N == p.rank.N && size.N == p.size.N) || p.size.N > size.N {
		return nil
	}
	return &topology.LayerConflictError{Inner: topology.Torchrun, Outer: outer,
		InnerRank: p.rank, InnerSize: p.size, OuterRank: rank, OuterSize: size, Resolution: staleHint}
}

// outerLayer returns the rank and world size of the launcher under the
// torchrun layer: the next row that matches, by the same rules as detect
// (srun --mpi=pmi2/pmix is Slurm). ok is false when it does not give both;
// a layer without ranks (the batch script, nothing) gives neither.
func outerLayer(getenv topology.Getenv) (l topology.Launcher, rank, size topology.Value, ok bool, err error) {
	o := match(getenv, below(topology.Torchrun))
	if o.rank == nil {
		return o.launcher, rank, size, false, nil
	}
	p, err := readCounts(getenv, o) // checked even when srun stands behind them
	if err == nil && srunPMI(getenv, o) {
		o = slurmStep
		p, err = readCounts(getenv, o)
	}
	if err != nil {
		return o.launcher, rank, size, false, err
	}
	return o.launcher, p.rank, p.size, p.rank.Set() && p.size.Set(), nil
}

// slurmWithPMI handles srun --mpi=pmi2/pmix (srunPMI): Slurm is the
// launcher, and the rank and size of the PMI layer l must agree with it.
func slurmWithPMI(getenv topology.Getenv, l layer) (topology.Topology, error) {
	pmi, err := readCounts(getenv, l)
	if err != nil {
		return topology.Topology{}, err
	}
	p, err := ranks(getenv, slurmStep)
	if err != nil {
		return topology.Topology{}, err
	}
	for _, c := range []struct {
		what       string
		slurm, pmi topology.Value
	}{{"rank", p.rank, pmi.rank}, {"world size", p.size, pmi.size}} {
		if c.pmi.Set() && c.pmi.N != c.slurm.N {
			return topology.Topology{}, &topology.ConflictError{What: c.what, Launcher: topology.Slurm,
				A: c.slurm.Var, AValue: c.slurm.Raw, B: c.pmi.Var, BValue: c.pmi.Raw}
		}
	}
	return fromPartial(p), nil
}
