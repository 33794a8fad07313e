package detect

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/topology"
)

// finish fills what the launcher layers leave open, by the same rules for
// every layer: job id, host list, node placement, MASTER_ADDR and MASTER_PORT.
func finish(getenv topology.Getenv, opts Options, t *topology.Topology) error {
	// Inside a Slurm job every rank under every launcher shares the job id
	// and the job's node list; they are never stale.
	hostsFromSlurm := t.Hosts != nil
	if id := SlurmJobID(getenv); id != "" {
		t.JobID = id
		if t.Hosts == nil {
			hosts, err := SlurmJobHosts(getenv)
			if err != nil {
				return err
			}
			t.Hosts, hostsFromSlurm = hosts, hosts != nil
		}
	}
	if t.NodeRank < 0 || t.NumNodes < 0 {
		// Under an MPI launcher the MPI layout places the rank. A Slurm step
		// in its environment is the launcher's daemons', not the ranks':
		// Open MPI's leaves out the node mpirun runs on, whose ranks have
		// no step at all, so its SLURM_NODEID and node list would make
		// ranks disagree. It is consulted only when the layout cannot tell.
		hint := 0
		if hostsFromSlurm {
			hint = len(t.Hosts)
		}
		node, nodes, err := placeBlock(t.Rank, t.LocalRank, t.LocalWorldSize, t.WorldSize, t.NumNodes, hint)
		if err != nil {
			var ok bool
			node, nodes, ok, err = daemonNode(getenv, t, err)
			if !ok {
				return fmt.Errorf("%s environment: %w", t.Launcher, err)
			}
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
	case getenv(envvars.MasterAddr) != "":
		t.MasterAddr = getenv(envvars.MasterAddr)
	case t.MasterAddr != "": // the layer knows rank 0's host (allocation)
	case hostsFromSlurm && len(t.Hosts) > 0 && t.Launcher == topology.Slurm:
		addr, err := stepMaster(getenv, opts, t)
		if err != nil {
			return fmt.Errorf("%s environment: %w", t.Launcher, err)
		}
		t.MasterAddr = addr
	case hostsFromSlurm && len(t.Hosts) > 0:
		t.MasterAddr = t.Hosts[0]
	case t.NumNodes == 1:
		t.MasterAddr = "127.0.0.1"
	}
	// The tasks of one srun step share its id (an MPI launcher's ranks do
	// not: Open MPI's next to mpirun are in no step, and the layer gives
	// them no StepID); see RendezvousID.
	t.MasterPort = topology.PortForJob(topology.RendezvousID(t.JobID, t.StepID))
	if raw := getenv(envvars.MasterPort); raw != "" {
		p, err := strconv.Atoi(strings.TrimSpace(raw)) // as the counts are (and torch's int())
		if err != nil || p < 1 || p > 65535 {
			return &topology.VarError{Var: envvars.MasterPort, Value: raw, Msg: "not a port number (1-65535)"}
		}
		t.MasterPort = p
	}
	return nil
}

// daemonNode places a rank by the host its launcher's daemon runs on, when
// the MPI layout cannot (round-robin placement, an ambiguous short last
// node): a rank inherits its daemon's SLURM_NODEID, an index into that
// step's node list, which names the rank's host even when the step leaves
// out nodes. The node rank is that host's index in t.Hosts, the job's node
// list every rank of the launch uses. ok is false, with layoutErr or a
// step error, when that does not place it.
func daemonNode(getenv topology.Getenv, t *topology.Topology, layoutErr error) (node, nodes int, ok bool, err error) {
	id, stepHosts, inStep, err := daemonStep(getenv)
	if err != nil {
		return 0, 0, false, err
	}
	if !inStep || t.Launcher == topology.Slurm || t.Hosts == nil {
		return 0, 0, false, layoutErr
	}
	node = slices.Index(t.Hosts, stepHosts[id])
	nodes = t.NumNodes
	if nodes < 0 {
		// Hydra starts a proxy on exactly the nodes it uses. (Open MPI,
		// whose step may not, gives the node count.)
		nodes = len(stepHosts)
	}
	if node < 0 || node >= nodes {
		return 0, 0, false, layoutErr
	}
	return node, nodes, true, nil
}

// placeBlock infers which node a rank is on, and how many nodes there are,
// when the launcher does not say. It assumes block placement: consecutive
// ranks fill a node before the next one starts, every node but the last
// holds the same number of ranks. That is the default of mpirun -ppn N,
// --map-by ppr:N:node and Slurm's block distribution. numNodes is the count
// when the launcher gives it (Open MPI does), else -1; hint, when not 0, is
// the number of nodes in the Slurm allocation, an upper bound.
//
// A rank on a full node knows the ranks per node (its local size). A rank
// on the last node does not: its node may be full or short. When more than
// one block size fits what it sees, it fails rather than guess, since the
// ranks on full nodes would then count the nodes differently.
func placeBlock(rank, local, localSize, world, numNodes, hint int) (node, nodes int, err error) {
	// Detection rejects these naming the variable; this keeps placeBlock
	// total, never a division by zero, whatever it is given.
	if localSize < 1 || world < 1 || numNodes == 0 || numNodes > world {
		return 0, 0, fmt.Errorf("cannot place rank %d: local size %d, world size %d, %d nodes", rank, localSize, world, numNodes)
	}
	first := rank - local // the first rank on this node
	if local < 0 || local >= localSize || first < 0 || first+localSize > world {
		return 0, 0, fmt.Errorf("rank %d with local rank %d of %d does not fit in a world of %d", rank, local, localSize, world)
	}
	if localSize == world {
		if numNodes > 1 {
			return 0, 0, fmt.Errorf("all %d ranks are on this node, but the launcher counts %d nodes", world, numNodes)
		}
		return 0, 1, nil
	}
	if first+localSize < world { // not the last node, so a full one
		if first%localSize != 0 {
			return 0, 0, fmt.Errorf("cannot tell which node rank %d is on: ranks are not placed in blocks of %d per node; "+
				"place ranks by node (mpirun -ppn N, --map-by ppr:N:node) or set NODE_RANK through torchrun", rank, localSize)
		}
		nodes = (world + localSize - 1) / localSize
		if numNodes < 0 && hint > 0 && nodes > hint {
			// More blocks than the allocation has nodes: not block
			// placement (round robin, or ranks wrapping around).
			return 0, 0, fmt.Errorf("cannot tell which node rank %d is on: %d ranks in blocks of %d make %d nodes, more than the allocation's %d; "+
				"place ranks by node (mpirun -ppn N, --map-by ppr:N:node)", rank, world, localSize, nodes, hint)
		}
		if numNodes > 0 && numNodes != nodes {
			return 0, 0, fmt.Errorf("cannot tell which node rank %d is on: %d ranks in blocks of %d make %d nodes but the launcher counts %d; "+
				"place ranks by node (mpirun -ppn N, --map-by ppr:N:node)", rank, world, localSize, nodes, numNodes)
		}
		return first / localSize, nodes, nil
	}
	// The last node: the nodes before it hold `first` ranks in blocks of
	// some per >= localSize.
	if numNodes > 0 {
		if numNodes > 1 && first%(numNodes-1) == 0 && first/(numNodes-1) >= localSize {
			return numNodes - 1, numNodes, nil
		}
		return 0, 0, fmt.Errorf("cannot tell which node rank %d is on: %d ranks before its node do not fill %d equal blocks of at least %d; "+
			"place ranks by node (mpirun -ppn N, --map-by ppr:N:node)", rank, first, numNodes-1, localSize)
	}
	var fits []string // "node N of M" for every block size that fits
	for per := localSize; per <= first; per++ {
		if first%per == 0 && (hint == 0 || first/per+1 <= hint) {
			node, nodes = first/per, first/per+1
			fits = append(fits, fmt.Sprintf("node %d of %d", node, nodes))
		}
	}
	switch {
	case len(fits) == 1:
		return node, nodes, nil
	case len(fits) > 1:
		if len(fits) > 3 {
			fits = append(fits[:3], "...")
		}
		return 0, 0, fmt.Errorf("cannot tell which node rank %d is on: its node holds the last %d of %d ranks and it could be %s; "+
			"launch it so that the ranks learn the node count (batchkit mpirun, Open MPI's mpirun, or inside a Slurm allocation)", rank, localSize, world, strings.Join(fits, " or "))
	}
	return 0, 0, fmt.Errorf("cannot tell which node rank %d is on from a local size of %d in a world of %d", rank, localSize, world)
}
