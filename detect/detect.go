// Package detect decides which launcher started this process and returns its
// Topology. It is the one place that reads the launchers' variables
// (what a launcher means to the other packages, whether it stops a job
// whose rank failed, the PMI it offers, what pinning needs of it, is its
// traits row in package topology): layers.go holds a table with a row per
// launcher (the variables that identify it and those each count is read
// from), tried in order, the launcher closest to the process first:
//
//  1. the torchrun contract (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE),
//     which torchrun started by mpirun or srun legitimately sets over them,
//     if consistent with the launcher below it (checkOuter);
//  2. an MPI launcher: Open MPI, MVAPICH2, Cray PALS, MPICH / Intel MPI
//     Hydra, a bare PMIx server;
//  3. a Slurm srun step, where srun --mpi=pmi2/pmix sets PMI variables too
//     (srunPMI);
//  4. the Slurm batch script: rank 0 of 1, or with Options.Allocation the
//     shape of the allocation;
//  5. nothing: one local process.
//
// docs/reference/precedence.md's "Which launcher wins" says the same, in a
// table a test compares with the code's. Package slurm parses what Slurm's variables say
// (host lists, tasks per node, the step's shape); reading them is done here.
//
// Then the same rules for every layer (place.go): the job id and the job's
// node list, which stay true under any launcher inside a Slurm job; the
// node rank, placed by the MPI layout when the launcher does not say;
// MASTER_ADDR and MASTER_PORT, which win when set, else the host of rank 0
// (under Slurm by SLURM_DISTRIBUTION, distribution.go; else the first host
// of the node list, 127.0.0.1 when every rank is on this node) and
// topology.PortForJob of the job id (and an srun step's id). Last, the
// launcher facts the consumers would otherwise read again: the step id,
// the PMI offered (the launcher's row and pmiVars) and KillOnBadExit.
package detect

import (
	"fmt"

	"github.com/batchkit/batchkit/envvars"
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
	// ReadFile reads the file SLURM_HOSTFILE names, which says where rank 0
	// of an `srun -m arbitrary` step runs. nil: only a regular file of at
	// most 16 MiB is read (a FIFO or /dev/zero is refused).
	ReadFile func(path string) ([]byte, error)
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
	t.PMI = offeredPMI(getenv, t.Launcher)
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
		return allocation(getenv, opts, l)
	case l.rank == nil:
		return oneProcess(getenv, l)
	}
	p, err := ranks(getenv, l)
	if err != nil {
		return topology.Topology{}, err
	}
	if l.nests {
		if p, err = checkOuter(getenv, p); err != nil {
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
//
// When both agree the torchrun variables only restate the outer launch, so
// p gets its job and step id: the contract has no variable for them, and
// the next batchkit (train under batchkit exec) derives its job token and
// port from them as the outer launch's ranks do (PMIX_NAMESPACE under
// Open MPI, PMI_KVSNAME under Hydra, the srun step).
func checkOuter(getenv topology.Getenv, p partial) (partial, error) {
	// torchrun and batchkit run set a run id: their variables are a real
	// inner launcher's (one per node under srun or mpirun, say, where its
	// ranks need not match the outer ones), not an outer job's leftovers.
	if getenv(envvars.RunID) != "" {
		return p, nil
	}
	outer, ok, err := outerLayer(getenv)
	if err != nil || !ok {
		return p, err
	}
	rank, size := outer.rank, outer.size
	if size.N < 1 {
		return p, &topology.VarError{Var: size.Var, Value: size.Raw, Msg: "a size must be at least 1"}
	}
	switch {
	case rank.N == p.rank.N && size.N == p.size.N:
		p.jobID, p.stepID = outer.jobID, outer.stepID
		return p, nil
	case p.size.N > size.N:
		return p, nil
	}
	return p, &topology.LayerConflictError{Inner: topology.Torchrun, Outer: outer.launcher,
		InnerRank: p.rank, InnerSize: p.size, OuterRank: rank, OuterSize: size, Resolution: staleHint}
}

// outerLayer returns what the launcher under the torchrun layer says: the
// next row that matches, by the same rules as detect (srun
// --mpi=pmi2/pmix is Slurm). ok is false when it does not give both a rank
// and a world size; a layer without ranks (the batch script, nothing)
// gives neither.
func outerLayer(getenv topology.Getenv) (partial, bool, error) {
	o := match(getenv, below(topology.Torchrun))
	if o.rank == nil {
		return partial{launcher: o.launcher}, false, nil
	}
	p, err := readCounts(getenv, o) // checked even when srun stands behind them
	if err == nil && srunPMI(getenv, o) {
		o = slurmStep
		p, err = readCounts(getenv, o)
	}
	if err != nil {
		return partial{launcher: o.launcher}, false, err
	}
	return p, p.rank.Set() && p.size.Set(), nil
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
