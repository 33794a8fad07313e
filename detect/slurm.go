package detect

import (
	"fmt"

	"github.com/batchkit/batchkit/slurm"
	"github.com/batchkit/batchkit/topology"
)

// Slurm's layers describe nodes as lists (layer.hosts, layer.tasksPerNode);
// this file reads them. Package slurm parses and checks what they say.

// SlurmJobID returns the Slurm job id, or "" outside a Slurm job. Like the
// job's node list it stays true under any launcher inside the job.
func SlurmJobID(getenv topology.Getenv) string { return topology.FirstString(getenv, slurmJobID...) }

// SlurmStepID returns the srun step's id, or "" outside a step: for a
// caller that has no Topology (doctor, where detection may fail). A
// Topology carries its launch's as StepID, an srun step's only.
func SlurmStepID(getenv topology.Getenv) string { return topology.FirstString(getenv, slurmStepID...) }

// SlurmJobHosts expands the job's node list (SLURM_JOB_NODELIST). These
// job-level variables stay true inside any step, unlike the per-step ones,
// which an mpirun inside the allocation leaves stale.
func SlurmJobHosts(getenv topology.Getenv) ([]string, error) {
	return readHosts(getenv, slurmJobNodes)
}

// readHosts expands the first of names that is set; nil when none is.
func readHosts(getenv topology.Getenv, names []string) ([]string, error) {
	name := topology.AnySet(getenv, names...)
	if name == "" {
		return nil, nil
	}
	hosts, err := slurm.ExpandHostlist(getenv(name))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return hosts, nil
}

// readShape parses the first of a layer's tasks-per-node variables that is
// set; ok is false when none is.
func readShape(getenv topology.Getenv, l layer, hosts []string) (s slurm.Shape, ok bool, err error) {
	name := topology.AnySet(getenv, l.tasksPerNode...)
	if name == "" {
		return slurm.Shape{Hosts: hosts}, false, nil
	}
	s, err = slurm.ParseShape(name, getenv(name), hosts)
	return s, true, err
}

// layout reads a Slurm step's node lists into p: the tasks-per-node list,
// cross-checked with the counts read, gives the local size (its entry at
// the node rank) and the node count.
func layout(getenv topology.Getenv, l layer, p *partial) error {
	hosts, err := readHosts(getenv, l.hosts)
	if err != nil {
		return err
	}
	p.hosts = hosts
	s, ok, err := readShape(getenv, l, hosts)
	if err != nil {
		return err
	}
	if !ok {
		return &topology.IncompleteError{Launcher: l.launcher, Have: p.markerVar, HaveValue: p.marker, MissingAny: l.tasksPerNode}
	}
	if err := s.Check(p.size, p.nodeRank, p.numNodes); err != nil {
		return err
	}
	if s, err = nodeOrder(getenv, s, p.nodeRank); err != nil {
		return err
	}
	p.hosts = s.Hosts
	if err := s.CheckTask(p.rank, p.localRank, p.nodeRank, p.size); err != nil {
		return err
	}
	p.localSize = s.LocalSize(p.nodeRank.N)
	if !p.numNodes.Set() {
		p.numNodes = s.NumNodes()
	}
	return nil
}

// allocation is the batch script asked for its allocation
// (Options.Allocation): the shape a step of all the job's tasks would
// have, as rank 0 — what a script about to launch ranks wants to know.
// Rank 0 runs on the first node unless a host file says otherwise.
func allocation(getenv topology.Getenv, opts Options, l layer) (topology.Topology, error) {
	p, err := readCounts(getenv, l)
	if err != nil {
		return topology.Topology{}, err
	}
	if err := checkSizes(p); err != nil {
		return topology.Topology{}, err
	}
	hosts, err := readHosts(getenv, l.hosts)
	if err != nil {
		return topology.Topology{}, err
	}
	s, node, err := allocationShape(getenv, opts, l, p, hosts)
	if err != nil {
		return topology.Topology{}, err
	}
	t := topology.Topology{Launcher: l.launcher, WorldSize: s.Tasks(), LocalWorldSize: s.Counts[node], NodeRank: node,
		NumNodes: len(s.Counts), Hosts: s.Hosts, JobID: p.jobID}
	if len(s.Hosts) > node {
		t.MasterAddr = s.Hosts[node]
	}
	return t, nil
}

// daemonStep describes the Slurm step an MPI launcher started its per-node
// daemons in (Open MPI's orted, Hydra's proxies). Every rank inherits its
// daemon's SLURM_NODEID, an index into the step's node list that names the
// rank's host — even under round-robin placement — while the step's other
// counts describe the daemons and are useless for the rank. The step's node
// list is the daemons', not the launch's: Open MPI starts no daemon on the
// node mpirun runs on. ok is false outside a step.
func daemonStep(getenv topology.Getenv) (node int, hosts []string, ok bool, err error) {
	if !slurmStep.identified(getenv) {
		return 0, nil, false, nil
	}
	nv, err := readVars(getenv, topology.Slurm, "node id", slurmStep.nodeRank)
	if err != nil || !nv.Set() {
		return 0, nil, false, err
	}
	hosts, err = readHosts(getenv, slurmStep.hosts)
	if err != nil || hosts == nil {
		return 0, nil, false, err
	}
	// The step's own node count: the job's may differ from the step's list.
	nn, err := readVars(getenv, topology.Slurm, "number of nodes", slurmStep.numNodes[:1])
	if err != nil {
		return 0, nil, false, err
	}
	if nn.Set() && nn.N != len(hosts) {
		return 0, nil, false, &topology.VarError{Var: nn.Var, Value: nn.Raw,
			Msg: fmt.Sprintf("disagrees with the step's node list of %d hosts", len(hosts))}
	}
	if nv.N >= len(hosts) {
		return 0, nil, false, &topology.VarError{Var: nv.Var, Value: nv.Raw,
			Msg: fmt.Sprintf("node id out of range for a node list of %d hosts", len(hosts))}
	}
	return nv.N, hosts, true, nil
}
