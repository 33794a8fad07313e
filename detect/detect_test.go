package detect

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/topology"
)

// env builds a Getenv from "K=V" pairs, merged over base environments.
func env(parts ...map[string]string) topology.Getenv {
	m := map[string]string{}
	for _, p := range parts {
		for k, v := range p {
			m[k] = v
		}
	}
	return topology.MapEnv(m)
}

// Job-level variables of `sbatch -N2 --ntasks-per-node=2` on the local cluster.
var sbatchJob = map[string]string{
	"SLURM_JOB_ID": "42", "SLURM_JOBID": "42",
	"SLURM_JOB_NODELIST": "node[1-2]", "SLURM_NODELIST": "node[1-2]",
	"SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2",
	"SLURM_NTASKS": "4", "SLURM_NPROCS": "4",
	"SLURM_TASKS_PER_NODE": "2(x2)",
	"SLURM_PROCID":         "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
}

// The stale step an Open MPI mpirun's daemons run in (observed-env.md).
func ompiDaemonStep(node string) map[string]string {
	return map[string]string{
		"SLURM_STEP_ID": "0", "SLURM_STEPID": "0", "SLURM_PROCID": node, "SLURM_NODEID": node,
		"SLURM_NTASKS": "2", "SLURM_NPROCS": "2", "SLURM_LOCALID": "0",
		"SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NUM_NODES": "2",
		"SLURM_STEP_TASKS_PER_NODE": "1(x2)", "SLURM_TASKS_PER_NODE": "1(x2)", "SLURM_STEP_NODELIST": "node[1-2]",
	}
}

func ompiRank(rank, local string) map[string]string {
	return map[string]string{
		"OMPI_COMM_WORLD_RANK": rank, "OMPI_COMM_WORLD_SIZE": "4",
		"OMPI_COMM_WORLD_LOCAL_RANK": local, "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
		"OMPI_COMM_WORLD_NODE_RANK": local, "OMPI_MCA_orte_num_nodes": "2",
		"PMIX_RANK": rank, "PMIX_NAMESPACE": "1231355905",
	}
}

func hydraRank(rank, size, local, localSize string) map[string]string {
	return map[string]string{"PMI_RANK": rank, "PMI_SIZE": size, "MPI_LOCALRANKID": local, "MPI_LOCALNRANKS": localSize, "PMI_FD": "8"}
}

func srunTask(procid, localid, nodeid, ntasks, tpn, nodes string) map[string]string {
	return map[string]string{
		"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_STEP_NODELIST": "node[1-2]",
		"SLURM_STEP_ID": "0", "SLURM_PROCID": procid, "SLURM_LOCALID": localid, "SLURM_NODEID": nodeid,
		"SLURM_NTASKS": ntasks, "SLURM_STEP_NUM_TASKS": ntasks, "SLURM_STEP_TASKS_PER_NODE": tpn,
		"SLURM_TASKS_PER_NODE": tpn, "SLURM_STEP_NUM_NODES": nodes, "SLURM_JOB_NUM_NODES": nodes,
	}
}

func TestDetect(t *testing.T) {
	port7, port42 := topology.PortForJob("7"), topology.PortForJob("42")
	tests := []struct {
		name string
		env  topology.Getenv
		opts Options
		want topology.Topology
	}{
		{
			name: "nothing: one local process",
			env:  env(),
			opts: Options{Hostname: "vm"},
			want: topology.Topology{Launcher: topology.Single, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1,
				Hosts: []string{"vm"}, MasterAddr: "127.0.0.1", MasterPort: topology.DefaultPort},
		},
		{
			name: "srun -N2 -n4, rank 3 alone on node2",
			env:  env(srunTask("3", "0", "1", "4", "3,1", "2")),
			want: topology.Topology{Launcher: topology.Slurm, Rank: 3, WorldSize: 4, LocalRank: 0, LocalWorldSize: 1,
				NodeRank: 1, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port7, JobID: "7"},
		},
		{
			name: "srun -N2 -n4, rank 2 third on node1",
			env:  env(srunTask("2", "2", "0", "4", "3,1", "2")),
			want: topology.Topology{Launcher: topology.Slurm, Rank: 2, WorldSize: 4, LocalRank: 2, LocalWorldSize: 3,
				NodeRank: 0, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port7, JobID: "7"},
		},
		{
			name: "srun --ntasks-per-node=2, compressed tasks per node",
			env:  env(srunTask("3", "1", "1", "4", "2(x2)", "2")),
			want: topology.Topology{Launcher: topology.Slurm, Rank: 3, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 1, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port7, JobID: "7"},
		},
		{
			name: "srun --mpi=pmi2: PMI agrees, Slurm is the launcher",
			env:  env(srunTask("1", "1", "0", "3", "2,1", "2"), map[string]string{"PMI_RANK": "1", "PMI_SIZE": "3"}),
			want: topology.Topology{Launcher: topology.Slurm, Rank: 1, WorldSize: 3, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 0, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port7, JobID: "7"},
		},
		{
			name: "the batch script: rank 0 of 1 on the first node",
			env:  env(sbatchJob),
			want: topology.Topology{Launcher: topology.SlurmBatch, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1,
				Hosts: []string{"node1"}, MasterAddr: "node1", MasterPort: port42, JobID: "42"},
		},
		{
			name: "the batch script asked for the allocation",
			env:  env(sbatchJob),
			opts: Options{Allocation: true},
			want: topology.Topology{Launcher: topology.SlurmBatch, WorldSize: 4, LocalWorldSize: 2, NumNodes: 2,
				Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port42, JobID: "42"},
		},
		{
			name: "Open MPI inside sbatch, rank 3: stale SLURM_PROCID=1 ignored",
			env:  env(sbatchJob, ompiDaemonStep("1"), ompiRank("3", "1")),
			want: topology.Topology{Launcher: topology.OpenMPI, Rank: 3, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 1, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port42, JobID: "42"},
		},
		{
			name: "MPICH inside sbatch, rank 2: SLURM_NTASKS=4 stale step ignored",
			env: env(sbatchJob, map[string]string{"SLURM_STEP_ID": "1", "SLURM_PROCID": "1", "SLURM_NODEID": "1", "SLURMD_NODENAME": "node1"},
				hydraRank("2", "4", "0", "2")),
			want: topology.Topology{Launcher: topology.Hydra, Rank: 2, WorldSize: 4, LocalRank: 0, LocalWorldSize: 2,
				NodeRank: 1, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port42, JobID: "42"},
		},
		{
			name: "mpirun.mpich -n 3 -ppn 2 in a 4-task allocation: rank 2 alone on the last node",
			env: env(sbatchJob, map[string]string{"SLURM_STEP_ID": "2", "SLURM_PROCID": "1", "SLURM_NODEID": "1", "SLURM_STEP_NODELIST": "node[1-2]"},
				hydraRank("2", "3", "0", "1")),
			want: topology.Topology{Launcher: topology.Hydra, Rank: 2, WorldSize: 3, LocalRank: 0, LocalWorldSize: 1,
				NodeRank: 1, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port42, JobID: "42"},
		},
		{
			name: "mpirun.mpich -n 4 -ppn 1 (round robin) inside sbatch: the daemon step's SLURM_NODEID places rank 1",
			env: env(sbatchJob, map[string]string{"SLURM_STEP_ID": "4", "SLURM_PROCID": "1", "SLURM_NODEID": "1", "SLURM_STEP_NODELIST": "node[1-2]",
				"SLURM_STEP_NUM_NODES": "2"}, hydraRank("1", "4", "0", "2")),
			want: topology.Topology{Launcher: topology.Hydra, Rank: 1, WorldSize: 4, LocalRank: 0, LocalWorldSize: 2,
				NodeRank: 1, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port42, JobID: "42"},
		},
		{
			name: "mpirun.mpich -n 3 -ppn 2 over ssh in an allocation (no step): block placement with the allocation as bound",
			env:  env(sbatchJob, hydraRank("2", "3", "0", "1")),
			want: topology.Topology{Launcher: topology.Hydra, Rank: 2, WorldSize: 3, LocalRank: 0, LocalWorldSize: 1,
				NodeRank: 1, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port42, JobID: "42"},
		},
		{
			name: "mpirun -n 2 without Slurm: one node, loopback master, port from the PMIx namespace",
			env: env(map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
				"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_MCA_orte_num_nodes": "1", "PMIX_RANK": "1", "PMIX_NAMESPACE": "1231355905"}),
			opts: Options{Hostname: "vm"},
			want: topology.Topology{Launcher: topology.OpenMPI, Rank: 1, WorldSize: 2, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 0, NumNodes: 1, Hosts: []string{"vm"}, MasterAddr: "127.0.0.1", MasterPort: topology.PortForJob("1231355905"), JobID: "1231355905"},
		},
		{
			name: "torchrun started by mpirun, one per node: RANK beats PMI_RANK",
			env: env(sbatchJob, hydraRank("1", "2", "0", "1"), map[string]string{"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1",
				"LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1", "MASTER_ADDR": "node1", "MASTER_PORT": "29400"}),
			want: topology.Topology{Launcher: topology.Torchrun, Rank: 5, WorldSize: 8, LocalRank: 1, LocalWorldSize: 4,
				NodeRank: 1, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: 29400, JobID: "42"},
		},
		{
			name: "MVAPICH2 mpirun_rsh with MASTER_ADDR given",
			env: env(map[string]string{"MV2_COMM_WORLD_RANK": "5", "MV2_COMM_WORLD_SIZE": "6", "MV2_COMM_WORLD_LOCAL_RANK": "1",
				"MV2_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "head"}),
			want: topology.Topology{Launcher: topology.MVAPICH, Rank: 5, WorldSize: 6, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 2, NumNodes: 3, Hosts: []string{}, MasterAddr: "head", MasterPort: topology.DefaultPort},
		},
		{
			name: "Cray PALS gives the node id",
			env: env(map[string]string{"PALS_RANKID": "9", "PMI_RANK": "9", "PMI_SIZE": "16", "PALS_LOCAL_RANKID": "1",
				"PMI_LOCAL_SIZE": "8", "PALS_NODEID": "1", "PALS_APID": "abc-123", "MASTER_ADDR": "x1000c0s0b0n0"}),
			want: topology.Topology{Launcher: topology.PALS, Rank: 9, WorldSize: 16, LocalRank: 1, LocalWorldSize: 8,
				NodeRank: 1, NumNodes: 2, Hosts: []string{}, MasterAddr: "x1000c0s0b0n0", MasterPort: topology.PortForJob("abc-123"), JobID: "abc-123"},
		},
		{
			name: "Hydra -pmi-port mode: PMI_ID",
			env:  env(map[string]string{"PMI_ID": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}),
			want: topology.Topology{Launcher: topology.Hydra, Rank: 1, WorldSize: 2, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 0, NumNodes: 1, Hosts: []string{}, MasterAddr: "127.0.0.1", MasterPort: topology.DefaultPort},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.env, tt.opts)
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Detect (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDetectErrors(t *testing.T) {
	tests := []struct {
		name string
		env  topology.Getenv
		want []string // substrings of the one-line error
	}{
		{"PMIX_RANK disagrees with OMPI_COMM_WORLD_RANK",
			env(ompiRank("3", "1"), map[string]string{"PMIX_RANK": "2"}),
			[]string{"conflicting rank", "OMPI_COMM_WORLD_RANK=3", "PMIX_RANK=2"}},
		{"PMI_RANK disagrees with PALS_RANKID",
			env(map[string]string{"PALS_RANKID": "1", "PMI_RANK": "2", "PMI_SIZE": "4"}),
			[]string{"conflicting rank", "PALS_RANKID=1", "PMI_RANK=2"}},
		{"rank without size",
			env(map[string]string{"OMPI_COMM_WORLD_RANK": "0"}),
			[]string{"incomplete openmpi", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE"}},
		{"RANK without WORLD_SIZE",
			env(map[string]string{"RANK": "0", "LOCAL_RANK": "0"}),
			[]string{"incomplete torchrun", "WORLD_SIZE"}},
		{"not an integer",
			env(srunTask("x", "0", "0", "4", "4", "1")),
			[]string{`SLURM_PROCID="x"`, "not an integer"}},
		{"negative",
			env(hydraRank("-1", "4", "0", "4")),
			[]string{`PMI_RANK="-1"`, "negative"}},
		{"rank out of range",
			env(hydraRank("4", "4", "0", "4")),
			[]string{"rank 4 out of range for world size 4"}},
		{"local rank out of range",
			env(srunTask("1", "3", "0", "4", "2(x2)", "2")),
			[]string{`SLURM_LOCALID="3"`, "out of range"}},
		{"tasks per node do not sum to the world",
			env(srunTask("1", "1", "0", "5", "2(x2)", "2")),
			[]string{"SLURM_STEP_TASKS_PER_NODE", "sum to 4", "SLURM_STEP_NUM_TASKS=5"}},
		{"SLURM_NTASKS and SLURM_NPROCS disagree",
			env(map[string]string{"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_NPROCS": "3",
				"SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_TASKS_PER_NODE": "2"}),
			[]string{"conflicting world size", "SLURM_NTASKS=2", "SLURM_NPROCS=3"}},
		{"srun --mpi=pmi2 with a PMI rank that disagrees",
			env(srunTask("1", "1", "0", "4", "2(x2)", "2"), map[string]string{"PMI_RANK": "2", "PMI_SIZE": "4"}),
			[]string{"conflicting rank", "SLURM_PROCID=1", "PMI_RANK=2"}},
		{"bad node list",
			env(srunTask("0", "0", "0", "2", "1(x2)", "2"), map[string]string{"SLURM_STEP_NODELIST": "node[2-1]"}),
			[]string{"SLURM_STEP_NODELIST", "node[2-1]"}},
		{"bad MASTER_PORT",
			env(map[string]string{"MASTER_PORT": "70000"}),
			[]string{`MASTER_PORT="70000"`}},
		{"round-robin placement cannot be placed in blocks",
			env(map[string]string{"PMI_RANK": "1", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2"}),
			[]string{"cannot tell which node rank 1 is on"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Detect(tt.env, Options{})
			if err == nil {
				t.Fatal("Detect succeeded, want an error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// Every rank of one job must agree on the rendezvous point.
func TestAllRanksAgreeOnMaster(t *testing.T) {
	var seen []string
	for r := 0; r < 4; r++ {
		rank := string(rune('0' + r))
		local := string(rune('0' + r%2))
		node := string(rune('0' + r/2))
		for _, e := range []topology.Getenv{
			env(srunTask(rank, local, node, "4", "2(x2)", "2")),
			env(sbatchJob, ompiDaemonStep(node), ompiRank(rank, local)),
			env(sbatchJob, map[string]string{"SLURM_STEP_ID": "1", "SLURM_PROCID": node}, hydraRank(rank, "4", local, "2")),
		} {
			got, err := Detect(e, Options{Hostname: "h" + rank})
			if err != nil {
				t.Fatal(err)
			}
			seen = append(seen, got.MasterAddr)
		}
	}
	for _, s := range seen {
		if s != "node1" {
			t.Fatalf("master addresses %v: want node1 everywhere", seen)
		}
	}
}

func TestPlaceBlock(t *testing.T) {
	tests := []struct {
		name                                          string
		rank, local, localSize, world, numNodes, hint int
		node, nodes                                   int
	}{
		{"single node", 1, 1, 4, 4, -1, 0, 0, 1},
		{"full second node", 5, 1, 4, 8, -1, 0, 1, 2},
		{"short last node, count given", 2, 0, 1, 3, 2, 0, 1, 2},
		{"short last node, allocation hint", 2, 0, 1, 3, -1, 2, 1, 2},
		{"short last node -ppn 4 of 5, hint 2", 4, 0, 1, 5, -1, 2, 1, 2},
		{"even last node", 3, 1, 2, 4, -1, 0, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, nodes, err := placeBlock(tt.rank, tt.local, tt.localSize, tt.world, tt.numNodes, tt.hint)
			if err != nil {
				t.Fatal(err)
			}
			if node != tt.node || nodes != tt.nodes {
				t.Errorf("placeBlock = node %d of %d, want %d of %d", node, nodes, tt.node, tt.nodes)
			}
		})
	}
}
