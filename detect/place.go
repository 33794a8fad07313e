package detect

import (
	"fmt"
	"strconv"

	"github.com/batchkit/batchkit/slurm"
	"github.com/batchkit/batchkit/topology"
)

// finish fills what the launcher layers leave open, by the same rules for
// every layer: job id, host list, node placement, MASTER_ADDR and MASTER_PORT.
func finish(getenv topology.Getenv, opts Options, t *topology.Topology) error {
	// Inside a Slurm job every rank under every launcher shares the job id
	// and the job's node list; they are never stale.
	hostsFromSlurm := t.Hosts != nil
	if id := slurm.JobID(getenv); id != "" {
		t.JobID = id
		if t.Hosts == nil {
			hosts, err := slurm.JobHosts(getenv)
			if err != nil {
				return err
			}
			t.Hosts, hostsFromSlurm = hosts, hosts != nil
		}
	}
	if t.NodeRank < 0 {
		// An MPI launcher inside an allocation: its daemons' step knows
		// the node (see slurm.LauncherStep).
		node, hosts, ok, err := slurm.LauncherStep(getenv)
		if err != nil {
			return err
		}
		if ok {
			t.NodeRank, t.Hosts, hostsFromSlurm = node, hosts, true
			if t.NumNodes < 0 {
				t.NumNodes = len(hosts)
			}
		}
	}
	if t.NodeRank < 0 || t.NumNodes < 0 {
		hint := 0
		if hostsFromSlurm {
			hint = len(t.Hosts)
		}
		node, nodes, err := placeBlock(t.Rank, t.LocalRank, t.LocalWorldSize, t.WorldSize, t.NumNodes, hint)
		if err != nil {
			return fmt.Errorf("%s environment: %w", t.Launcher, err)
		}
		if t.NodeRank < 0 {
			t.NodeRank = node
		}
		t.NumNodes = nodes
	}
	// An mpirun may use only the first nodes of a larger allocation.
	if hostsFromSlurm && t.Launcher != topology.Slurm && len(t.Hosts) > t.NumNodes && t.NumNodes > 0 {
		t.Hosts = t.Hosts[:t.NumNodes]
	}
	if t.Hosts == nil && t.NumNodes == 1 && opts.Hostname != "" {
		t.Hosts = []string{opts.Hostname}
	}
	if t.Hosts == nil {
		t.Hosts = []string{}
	}

	switch {
	case getenv("MASTER_ADDR") != "":
		t.MasterAddr = getenv("MASTER_ADDR")
	case hostsFromSlurm && len(t.Hosts) > 0:
		t.MasterAddr = t.Hosts[0]
	case t.NumNodes == 1:
		t.MasterAddr = "127.0.0.1"
	}
	t.MasterPort = topology.PortForJob(t.JobID)
	if raw := getenv("MASTER_PORT"); raw != "" {
		p, err := strconv.Atoi(raw)
		if err != nil || p < 1 || p > 65535 {
			return &topology.VarError{Var: "MASTER_PORT", Value: raw, Msg: "not a port number (1-65535)"}
		}
		t.MasterPort = p
	}
	return nil
}

// placeBlock infers which node a rank is on, and how many nodes there are,
// when the launcher does not say. It assumes block placement: consecutive
// ranks fill a node before the next one starts, every node but the last
// holds the same number of ranks. That is the default of mpirun -ppn N,
// --map-by ppr:N:node and Slurm's block distribution. numNodes is the count
// when the launcher gives it (Open MPI does), else -1; hint, when not 0, is
// the number of nodes in the Slurm allocation, an upper bound.
//
// A rank on a full node knows the ranks per node (its local size); a rank on
// a shorter last node does not, and takes the most nodes the hint allows.
func placeBlock(rank, local, localSize, world, numNodes, hint int) (node, nodes int, err error) {
	first := rank - local // the first rank on this node
	if localSize == world {
		return 0, 1, nil
	}
	if first < 0 || first+localSize > world {
		return 0, 0, fmt.Errorf("rank %d with local rank %d of %d does not fit in a world of %d", rank, local, localSize, world)
	}
	if first+localSize < world { // not the last node, so a full one
		if first%localSize != 0 {
			return 0, 0, fmt.Errorf("cannot tell which node rank %d is on: ranks are not placed in blocks of %d per node; "+
				"place ranks by node (mpirun -ppn N, --map-by ppr:N:node) or set NODE_RANK through torchrun", rank, localSize)
		}
		nodes = numNodes
		if nodes < 0 {
			nodes = (world + localSize - 1) / localSize
		}
		return first / localSize, nodes, nil
	}
	if numNodes > 0 {
		return numNodes - 1, numNodes, nil
	}
	for per := localSize; per <= first; per++ {
		if first%per == 0 && (hint == 0 || first/per+1 <= hint) {
			return first / per, first/per + 1, nil
		}
	}
	return 0, 0, fmt.Errorf("cannot tell which node rank %d is on from a local size of %d in a world of %d", rank, localSize, world)
}
