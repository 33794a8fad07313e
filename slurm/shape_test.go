package slurm

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/topology"
)

// srun spreads a step's tasks evenly over the allocation's nodes, the first
// nodes taking one more (detect's TestAllocationMoreSlotsThanTasks reads it
// through the environment).
func TestBalanced(t *testing.T) {
	for n, want := range map[[2]int][]int{{4, 2}: {2, 2}, {3, 2}: {2, 1}, {7, 3}: {3, 2, 2}, {2, 2}: {1, 1}} {
		if got := balanced(n[0], n[1]); !slices.Equal(got, want) {
			t.Errorf("balanced(%d, %d) = %v, want %v", n[0], n[1], got, want)
		}
	}
}

func TestForStep(t *testing.T) {
	n := func(v int) topology.Value { return topology.Value{Var: "SLURM_NTASKS", Raw: "x", N: v} }
	tests := []struct {
		name  string
		shape Shape
		size  topology.Value
		want  []int
	}{
		{"sbatch -N2 -n4 --ntasks-per-node=3: 2+2", Shape{Counts: []int{3, 3}}, n(4), []int{2, 2}},
		{"as many tasks as slots: unchanged", Shape{Counts: []int{3, 3}}, n(6), []int{3, 3}},
		{"fewer tasks than nodes: unchanged, Check refuses", Shape{Counts: []int{3, 3}}, n(1), []int{3, 3}},
		{"no task count: unchanged", Shape{Counts: []int{2, 1}}, topology.Value{}, []int{2, 1}},
		{"no tasks per node: one per host", Shape{Hosts: []string{"a", "b", "c"}}, topology.Value{}, []int{1, 1, 1}},
		{"no tasks per node, no hosts: one", Shape{}, topology.Value{}, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.shape.ForStep(tt.size).Counts); diff != "" {
				t.Errorf("ForStep (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShapeCheck(t *testing.T) {
	s, err := ParseShape("SLURM_STEP_TASKS_PER_NODE", "2(x2)", []string{"n1", "n2"})
	if err != nil {
		t.Fatal(err)
	}
	v := func(name string, n int) topology.Value { return topology.Value{Var: name, Raw: "v", N: n} }
	tests := []struct {
		name                 string
		shape                Shape
		size, node, numNodes topology.Value
		want                 string // a substring of the error; "" none
	}{
		{"all agree", s, v("SLURM_NTASKS", 4), v("SLURM_NODEID", 1), v("SLURM_NNODES", 2), ""},
		{"nothing to check against", s, topology.Value{}, topology.Value{}, topology.Value{}, ""},
		{"sum", s, v("SLURM_NTASKS", 5), topology.Value{}, topology.Value{}, `SLURM_STEP_TASKS_PER_NODE="2(x2)": tasks per node sum to 4 but SLURM_NTASKS=v`},
		{"node id", s, topology.Value{}, v("SLURM_NODEID", 2), topology.Value{}, `SLURM_NODEID="v": node id out of range`},
		{"hosts", Shape{Var: "T", Raw: "1", Counts: []int{1}, Hosts: []string{"a", "b"}}, topology.Value{}, topology.Value{}, topology.Value{},
			"lists 1 nodes but the node list has 2 hosts"},
		{"node count", s, topology.Value{}, topology.Value{}, v("SLURM_JOB_NUM_NODES", 3), `SLURM_JOB_NUM_NODES="v": disagrees with SLURM_STEP_TASKS_PER_NODE="2(x2)" (2 nodes)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.shape.Check(tt.size, tt.node, tt.numNodes)
			if got := ""; err != nil || tt.want != "" {
				if err != nil {
					got = err.Error()
				}
				if tt.want == "" || !strings.Contains(got, tt.want) {
					t.Errorf("Check = %q, want %q", got, tt.want)
				}
			}
		})
	}
	if _, err := ParseShape("SLURM_TASKS_PER_NODE", "2(x", nil); err == nil || !strings.HasPrefix(err.Error(), "SLURM_TASKS_PER_NODE: ") {
		t.Errorf("ParseShape error %v: want one naming the variable", err)
	}
}
