package slurm

import (
	"fmt"

	"github.com/batchkit/batchkit/topology"
)

// Shape is how Slurm lays out the tasks of a step or a job: the tasks on
// each node in node-list order, parsed from the tasks-per-node variable Var
// (SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS_PER_NODE) whose value is Raw,
// and the hosts of the node list when known (nil otherwise). Package
// detect reads the variables; these pure functions check and reshape what
// they say, with errors that name the variables.
type Shape struct {
	Var, Raw string
	Counts   []int
	Hosts    []string
}

// ParseShape parses raw, the value of the tasks-per-node variable name.
func ParseShape(name, raw string, hosts []string) (Shape, error) {
	counts, err := ParseTasksPerNode(raw)
	if err != nil {
		return Shape{}, fmt.Errorf("%s: %w", name, err)
	}
	return Shape{Var: name, Raw: raw, Counts: counts, Hosts: hosts}, nil
}

// Tasks is the number of tasks on all nodes.
func (s Shape) Tasks() int {
	sum := 0
	for _, c := range s.Counts {
		sum += c
	}
	return sum
}

// LocalSize is the number of tasks on node, which Check has found in range,
// named by the tasks-per-node variable.
func (s Shape) LocalSize(node int) topology.Value {
	return topology.Value{Var: s.Var, Raw: s.Raw, N: s.Counts[node]}
}

// NumNodes is the number of nodes, named by the tasks-per-node variable.
func (s Shape) NumNodes() topology.Value {
	return topology.Value{Var: s.Var, Raw: s.Raw, N: len(s.Counts)}
}

// Check cross-checks the shape with the task count size, a task's node id
// and the node count numNodes, each read with its variable; an unset value
// is not checked.
func (s Shape) Check(size, node, numNodes topology.Value) error {
	if size.Set() && s.Tasks() != size.N {
		return &topology.VarError{Var: s.Var, Value: s.Raw,
			Msg: fmt.Sprintf("tasks per node sum to %d but %s=%s", s.Tasks(), size.Var, size.Raw)}
	}
	if node.Set() && node.N >= len(s.Counts) {
		return &topology.VarError{Var: node.Var, Value: node.Raw,
			Msg: fmt.Sprintf("node id out of range: %s=%q lists %d nodes", s.Var, s.Raw, len(s.Counts))}
	}
	if s.Hosts != nil && len(s.Hosts) != len(s.Counts) {
		return &topology.VarError{Var: s.Var, Value: s.Raw,
			Msg: fmt.Sprintf("lists %d nodes but the node list has %d hosts", len(s.Counts), len(s.Hosts))}
	}
	if numNodes.Set() && numNodes.N != len(s.Counts) {
		return &topology.VarError{Var: numNodes.Var, Value: numNodes.Raw,
			Msg: fmt.Sprintf("disagrees with %s=%q (%d nodes)", s.Var, s.Raw, len(s.Counts))}
	}
	return nil
}

// CheckTask checks a task of the step against the shape, after Check: its
// local rank against the tasks on its node, its rank against the task count.
func (s Shape) CheckTask(rank, local, node, size topology.Value) error {
	if n := s.Counts[node.N]; local.N >= n {
		return &topology.VarError{Var: local.Var, Value: local.Raw,
			Msg: fmt.Sprintf("local rank out of range: %s=%q gives node %d only %d tasks", s.Var, s.Raw, node.N, n)}
	}
	if rank.N >= size.N {
		return &topology.VarError{Var: rank.Var, Value: rank.Raw, Msg: fmt.Sprintf("rank out of range for %s=%s", size.Var, size.Raw)}
	}
	return nil
}

// ForStep returns the shape a step of size tasks (unset: one per slot)
// takes in an allocation of shape s, as srun starts it by default: with no
// tasks-per-node list, one task per node; with fewer tasks than slots but
// at least one per node, spread evenly. sbatch -N2 -n4
// --ntasks-per-node=3 says 3(x2), but a step of the job's 4 tasks runs
// them 2+2.
func (s Shape) ForStep(size topology.Value) Shape {
	if s.Counts == nil {
		s.Counts = balanced(max(len(s.Hosts), 1), max(len(s.Hosts), 1))
	}
	if size.Set() && size.N < s.Tasks() && size.N >= len(s.Counts) {
		s.Counts = balanced(size.N, len(s.Counts))
	}
	return s
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
