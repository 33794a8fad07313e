package slurm

import (
	"fmt"

	"github.com/batchkit/batchkit/topology"
)

// Variables Slurm sets; the first of each list is the current name, the
// others are older aliases that Slurm still exports and that must agree.
var (
	varJobID        = []string{"SLURM_JOB_ID", "SLURM_JOBID"}
	varStepID       = []string{"SLURM_STEP_ID", "SLURM_STEPID"}
	varProcID       = []string{"SLURM_PROCID"}
	varStepNTasks   = []string{"SLURM_STEP_NUM_TASKS"}
	varNTasks       = []string{"SLURM_NTASKS", "SLURM_NPROCS"}
	varLocalID      = []string{"SLURM_LOCALID"}
	varNodeID       = []string{"SLURM_NODEID"}
	varStepNodes    = []string{"SLURM_STEP_NODELIST"}
	varJobNodes     = []string{"SLURM_JOB_NODELIST", "SLURM_NODELIST"}
	varStepTPN      = []string{"SLURM_STEP_TASKS_PER_NODE"}
	varJobTPN       = []string{"SLURM_TASKS_PER_NODE"}
	varStepNumNodes = []string{"SLURM_STEP_NUM_NODES"}
	varJobNumNodes  = []string{"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}
)

// StepID returns the srun step's id, or "" outside a step.
func StepID(getenv topology.Getenv) string { return topology.FirstString(getenv, varStepID...) }

// JobID returns the Slurm job id, or "" outside a Slurm job.
func JobID(getenv topology.Getenv) string { return topology.FirstString(getenv, varJobID...) }

// InStep reports whether this process is a task of a running srun step. The
// batch script has SLURM_PROCID=0 too, but no step id: it is not a task.
func InStep(getenv topology.Getenv) bool {
	return JobID(getenv) != "" && topology.AnySet(getenv, varStepID...) != ""
}

// JobHosts expands the job's node list (SLURM_JOB_NODELIST). These job-level
// variables stay true inside any step, unlike the per-step ones, which an
// mpirun inside the allocation leaves stale.
func JobHosts(getenv topology.Getenv) ([]string, error) {
	return hostsFrom(getenv, varJobNodes)
}

func hostsFrom(getenv topology.Getenv, names []string) ([]string, error) {
	for _, name := range names {
		if v := getenv(name); v != "" {
			hosts, err := ExpandHostlist(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			return hosts, nil
		}
	}
	return nil, nil
}

func tasksPerNode(getenv topology.Getenv, names []string) ([]int, string, error) {
	for _, name := range names {
		if v := getenv(name); v != "" {
			counts, err := ParseTasksPerNode(v)
			if err != nil {
				return nil, name, fmt.Errorf("%s: %w", name, err)
			}
			return counts, name, nil
		}
	}
	return nil, "", nil
}

// StepTopology reads the topology of a task of an srun step. ok is false when
// no step is running (no SLURM_JOB_ID or no SLURM_STEP_ID). Master address and
// port are left for the caller, which applies the same rule to every layer.
func StepTopology(getenv topology.Getenv) (t topology.Topology, ok bool, err error) {
	if !InStep(getenv) {
		return t, false, nil
	}
	t.Launcher = topology.Slurm
	t.JobID = JobID(getenv)
	// The step's own task count wins; SLURM_NTASKS/SLURM_NPROCS are aliases
	// that must agree with each other.
	sizeVars := varNTasks
	if getenv(varStepNTasks[0]) != "" {
		sizeVars = varStepNTasks
	}
	var rank, size, local, node topology.Value
	for _, r := range []struct {
		dst   *topology.Value
		what  string
		names []string
	}{
		{&rank, "rank", varProcID},
		{&size, "world size", sizeVars},
		{&local, "local rank", varLocalID},
		{&node, "node rank", varNodeID},
	} {
		v, err := topology.Int(getenv, t.Launcher, r.what, r.names...)
		if err != nil {
			return t, true, err
		}
		if !v.Set() {
			return t, true, &topology.IncompleteError{Launcher: t.Launcher, Have: "SLURM_STEP_ID",
				HaveValue: topology.FirstString(getenv, varStepID...), MissingAny: r.names}
		}
		*r.dst = v
	}
	if size.N < 1 {
		return t, true, &topology.VarError{Var: size.Var, Value: size.Raw, Msg: "a task count must be at least 1"}
	}
	t.Rank, t.WorldSize, t.LocalRank, t.NodeRank = rank.N, size.N, local.N, node.N

	hosts, err := hostsFrom(getenv, append(append([]string{}, varStepNodes...), varJobNodes...))
	if err != nil {
		return t, true, err
	}
	t.Hosts = hosts
	counts, tpnVar, err := tasksPerNode(getenv, append(append([]string{}, varStepTPN...), varJobTPN...))
	if err != nil {
		return t, true, err
	}
	if counts == nil {
		return t, true, &topology.IncompleteError{Launcher: t.Launcher, Have: "SLURM_STEP_ID",
			HaveValue: topology.FirstString(getenv, varStepID...), MissingAny: append(varStepTPN, varJobTPN...)}
	}
	if err := checkShape(getenv, counts, tpnVar, size, node, hosts); err != nil {
		return t, true, err
	}
	t.NumNodes = len(counts)
	t.LocalWorldSize = counts[node.N]
	if local.N >= t.LocalWorldSize {
		return t, true, &topology.VarError{Var: local.Var, Value: local.Raw,
			Msg: fmt.Sprintf("local rank out of range: %s=%q gives node %d only %d tasks", tpnVar, getenv(tpnVar), node.N, t.LocalWorldSize)}
	}
	if rank.N >= t.WorldSize {
		return t, true, &topology.VarError{Var: rank.Var, Value: rank.Raw,
			Msg: fmt.Sprintf("rank out of range for %s=%s", size.Var, size.Raw)}
	}
	return t, true, nil
}

// checkShape cross-checks the step's task counts, node ids and node list.
func checkShape(getenv topology.Getenv, counts []int, tpnVar string, size, node topology.Value, hosts []string) error {
	sum := 0
	for _, c := range counts {
		sum += c
	}
	if size.Set() && sum != size.N {
		return &topology.VarError{Var: tpnVar, Value: getenv(tpnVar),
			Msg: fmt.Sprintf("tasks per node sum to %d but %s=%s", sum, size.Var, size.Raw)}
	}
	if node.Set() && node.N >= len(counts) {
		return &topology.VarError{Var: node.Var, Value: node.Raw,
			Msg: fmt.Sprintf("node id out of range: %s=%q lists %d nodes", tpnVar, getenv(tpnVar), len(counts))}
	}
	if hosts != nil && len(hosts) != len(counts) {
		return &topology.VarError{Var: tpnVar, Value: getenv(tpnVar),
			Msg: fmt.Sprintf("lists %d nodes but the node list has %d hosts", len(counts), len(hosts))}
	}
	for _, names := range [][]string{varStepNumNodes, varJobNumNodes} {
		nn, err := topology.Int(getenv, topology.Slurm, "number of nodes", names...)
		if err != nil {
			return err
		}
		if nn.Set() {
			if nn.N != len(counts) {
				return &topology.VarError{Var: nn.Var, Value: nn.Raw,
					Msg: fmt.Sprintf("disagrees with %s=%q (%d nodes)", tpnVar, getenv(tpnVar), len(counts))}
			}
			break
		}
	}
	return nil
}

// BatchTopology describes the batch script (or an salloc shell): a process
// of the job that is not one of its tasks. By default it is rank 0 of 1 on
// the first node; with allocation=true it reports the shape the allocation
// was requested with (SLURM_NTASKS, SLURM_TASKS_PER_NODE), as rank 0 — what
// a script that is about to launch ranks wants to know. ok is false outside
// a Slurm job.
func BatchTopology(getenv topology.Getenv, allocation bool) (t topology.Topology, ok bool, err error) {
	t.JobID = JobID(getenv)
	if t.JobID == "" {
		return t, false, nil
	}
	t.Launcher = topology.SlurmBatch
	hosts, err := JobHosts(getenv)
	if err != nil {
		return t, true, err
	}
	if !allocation {
		t.WorldSize, t.LocalWorldSize, t.NumNodes = 1, 1, 1
		if len(hosts) > 0 {
			t.Hosts = hosts[:1] // the batch script runs on the allocation's first node
		}
		return t, true, nil
	}
	t.Hosts = hosts
	counts, tpnVar, err := tasksPerNode(getenv, varJobTPN)
	if err != nil {
		return t, true, err
	}
	size, err := topology.Int(getenv, t.Launcher, "world size", varNTasks...)
	if err != nil {
		return t, true, err
	}
	if size.Set() && size.N < 1 {
		return t, true, &topology.VarError{Var: size.Var, Value: size.Raw, Msg: "a task count must be at least 1"}
	}
	if counts == nil {
		// sbatch without a task count: one task per node, as srun would start.
		counts = make([]int, max(len(hosts), 1))
		for i := range counts {
			counts[i] = 1
		}
	}
	if sum := sumOf(counts); size.Set() && size.N < sum && size.N >= len(counts) {
		// sbatch -N2 -n4 --ntasks-per-node=3 says 3(x2) here, but a step
		// of the job's 4 tasks runs them 2+2: srun spreads the tasks
		// evenly, the first nodes taking one more.
		counts = balanced(size.N, len(counts))
	}
	if err := checkShape(getenv, counts, tpnVar, size, topology.Value{}, hosts); err != nil {
		return t, true, err
	}
	t.WorldSize = sumOf(counts)
	// Rank 0 runs on the first node, so it must hold a task.
	if counts[0] < 1 {
		return t, true, &topology.VarError{Var: tpnVar, Value: getenv(tpnVar), Msg: "the first node has no tasks: a node of a job holds at least 1"}
	}
	t.NumNodes, t.LocalWorldSize = len(counts), counts[0]
	return t, true, nil
}

func sumOf(counts []int) int {
	sum := 0
	for _, c := range counts {
		sum += c
	}
	return sum
}

// balanced spreads n tasks over nodes nodes as srun does by default: evenly,
// the first n%nodes nodes one more.
func balanced(n, nodes int) []int {
	out := make([]int, nodes)
	for i := range out {
		out[i] = n / nodes
		if i < n%nodes {
			out[i]++
		}
	}
	return out
}

// LauncherStep describes the Slurm step an MPI launcher started its
// per-node daemons in (Open MPI's orted, Hydra's proxies). Every rank
// inherits its daemon's SLURM_NODEID, an index into SLURM_STEP_NODELIST that
// names the rank's host — even under round-robin placement — while
// SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID describe the daemons and are
// useless for the rank. The step's node list is the daemons', not the
// launch's: Open MPI starts no daemon on the node mpirun runs on. ok is false
// outside a step.
func LauncherStep(getenv topology.Getenv) (node int, hosts []string, ok bool, err error) {
	if !InStep(getenv) {
		return 0, nil, false, nil
	}
	nv, err := topology.Int(getenv, topology.Slurm, "node id", varNodeID...)
	if err != nil || !nv.Set() {
		return 0, nil, false, err
	}
	hosts, err = hostsFrom(getenv, append(append([]string{}, varStepNodes...), varJobNodes...))
	if err != nil || hosts == nil {
		return 0, nil, false, err
	}
	nn, err := topology.Int(getenv, topology.Slurm, "number of nodes", varStepNumNodes...)
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

// StepRank reads the rank and task count of a task of an srun step
// (SLURM_PROCID and the step's task count, the same variables
// StepTopology uses) without the rest of the step's layout: enough to
// cross-check another layer that claims the same process. ok is false
// outside a step.
func StepRank(getenv topology.Getenv) (rank, size topology.Value, ok bool, err error) {
	if !InStep(getenv) {
		return rank, size, false, nil
	}
	sizeVars := varNTasks
	if getenv(varStepNTasks[0]) != "" {
		sizeVars = varStepNTasks
	}
	if rank, err = topology.Int(getenv, topology.Slurm, "rank", varProcID...); err != nil {
		return rank, size, true, err
	}
	if size, err = topology.Int(getenv, topology.Slurm, "world size", sizeVars...); err != nil {
		return rank, size, true, err
	}
	return rank, size, rank.Set() && size.Set(), nil
}
