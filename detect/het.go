package detect

import (
	"fmt"
	"strconv"

	"github.com/batchkit/batchkit/slurm"
	"github.com/batchkit/batchkit/topology"
)

// A step of several groups of a heterogeneous job (srun --het-group=0,1)
// numbers its nodes (SLURM_NODEID) group by group, group 0's first, but
// lists them (SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE) in node-list
// order: with group 0 on node2 and group 1 on node1, rank 0 has
// SLURM_NODEID=0 and runs on node2, the second host of the list
// (observed-env.md). The two orders agree when the groups' nodes come in
// node-list order, as they usually do.

// slurmNodeName is the node a Slurm task runs on, which every srun task has.
const slurmNodeName = "SLURMD_NODENAME"

// maxHetGroups bounds the groups read: Slurm allows far fewer.
const maxHetGroups = 1024

// nodeOrder returns the step's shape s with its hosts in the order of
// SLURM_NODEID: group by group when the step spans every group of a
// heterogeneous job. It checks, where SLURMD_NODENAME says, that this
// task's node id names its host, so that no order is guessed.
func nodeOrder(getenv topology.Getenv, s slurm.Shape, node topology.Value) (slurm.Shape, error) {
	het, ok, err := hetShape(getenv, s)
	if err != nil {
		return s, err
	}
	if ok {
		s = het
	}
	self := getenv(slurmNodeName)
	if self == "" || s.Hosts == nil || s.Hosts[node.N] == self {
		return s, nil
	}
	return s, &topology.VarError{Var: node.Var, Value: node.Raw,
		Msg: fmt.Sprintf("names %q, node %d of the step's node list, but this task runs on %s=%q: Slurm numbers the nodes in another order; set MASTER_ADDR, RANK, LOCAL_RANK and the sizes yourself",
			s.Hosts[node.N], node.N, slurmNodeName, self)}
}

// hetShape reorders s group by group when SLURM_HET_SIZE says this is a
// heterogeneous job and the groups' node lists together are the step's
// hosts (the step spans every group); ok is false otherwise.
func hetShape(getenv topology.Getenv, s slurm.Shape) (het slurm.Shape, ok bool, err error) {
	raw := getenv(slurmHetSize)
	if raw == "" || s.Hosts == nil {
		return s, false, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > maxHetGroups {
		return s, false, &topology.VarError{Var: slurmHetSize, Value: raw, Msg: fmt.Sprintf("not a group count (1-%d)", maxHetGroups)}
	}
	var order []string
	for g := range n {
		hosts, err := readHosts(getenv, []string{fmt.Sprintf("SLURM_JOB_NODELIST_HET_GROUP_%d", g)})
		if err != nil || len(order)+len(hosts) > len(s.Hosts) {
			return s, false, err
		}
		order = append(order, hosts...)
	}
	if len(order) != len(s.Hosts) {
		return s, false, nil
	}
	index := make(map[string]int, len(s.Hosts)) // a map: lists may hold a million hosts
	for j, h := range s.Hosts {
		index[h] = j
	}
	counts := make([]int, len(order))
	for i, h := range order {
		j, found := index[h]
		if !found {
			return s, false, nil // not a permutation of the step's hosts
		}
		delete(index, h) // a host twice is not one either
		counts[i] = s.Counts[j]
	}
	s.Hosts, s.Counts = order, counts
	return s, true, nil
}
