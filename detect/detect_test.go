package detect

import (
	"strconv"
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

// Open MPI's mpirun on node1 of `sbatch -N2 -n2` on a real cluster: plm_slurm
// starts daemons only where there is none, so its step holds node2 alone,
// and the rank beside mpirun inherits the batch script's variables.
var (
	ompiSkippedNodeJob = map[string]string{
		"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS": "2",
		"SLURM_TASKS_PER_NODE": "1(x2)", "SLURM_NODEID": "0", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
	}
	ompiSkippedNodeStep = map[string]string{
		"SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "node2", "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NUM_TASKS": "1",
		"SLURM_STEP_TASKS_PER_NODE": "1",
	}
)

func ompiSkippedNodeRank(rank string) map[string]string {
	return map[string]string{"OMPI_COMM_WORLD_RANK": rank, "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
		"OMPI_COMM_WORLD_LOCAL_SIZE": "1", "OMPI_MCA_orte_num_nodes": "2"}
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
	port7, port42, port77 := topology.PortForJob("7"), topology.PortForJob("42"), topology.PortForJob("77")
	tests := []struct {
		name string
		env  topology.Getenv
		opts Options
		want topology.Topology
	}{
		{
			name: "MASTER_PORT and RANK with white space around them, as torch's int() takes them",
			env:  env(map[string]string{"RANK": " 0", "WORLD_SIZE": "1 ", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "MASTER_PORT": " 29511\n"}),
			opts: Options{Hostname: "vm"},
			want: topology.Topology{Launcher: topology.Torchrun, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1,
				Hosts: []string{"vm"}, MasterAddr: "127.0.0.1", MasterPort: 29511},
		},
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
			// Steps of one job may run at once: each gets its own port.
			name: "srun step 1 of job 7: the step's own MASTER_PORT",
			env:  env(srunTask("3", "0", "1", "4", "3,1", "2"), map[string]string{"SLURM_STEP_ID": "1"}),
			want: topology.Topology{Launcher: topology.Slurm, Rank: 3, WorldSize: 4, LocalRank: 0, LocalWorldSize: 1,
				NodeRank: 1, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: topology.PortForJob("7.1"), JobID: "7"},
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
			// What batchkit mpirun adds for Hydra and mpirun_rsh ranks.
			name: "batchkit mpirun --flavor mpich -n 3 --ppn 2: BATCHKIT_MPIRUN_NUM_NODES places rank 2 alone on the last node",
			env:  env(hydraRank("2", "3", "0", "1"), map[string]string{"BATCHKIT_MPIRUN_NUM_NODES": "2"}),
			opts: Options{Hostname: "vm"},
			want: topology.Topology{Launcher: topology.Hydra, Rank: 2, WorldSize: 3, LocalRank: 0, LocalWorldSize: 1,
				NodeRank: 1, NumNodes: 2, Hosts: []string{}, MasterPort: topology.DefaultPort},
		},
		{
			name: "batchkit mpirun --flavor mvapich -n 6 --ppn 2: BATCHKIT_MPIRUN_NUM_NODES places rank 5 on node 2 of 3",
			env: env(map[string]string{"MV2_COMM_WORLD_RANK": "5", "MV2_COMM_WORLD_SIZE": "6", "MV2_COMM_WORLD_LOCAL_RANK": "1",
				"MV2_COMM_WORLD_LOCAL_SIZE": "2", "BATCHKIT_MPIRUN_NUM_NODES": "3"}),
			opts: Options{Hostname: "vm"},
			want: topology.Topology{Launcher: topology.MVAPICH, Rank: 5, WorldSize: 6, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 2, NumNodes: 3, Hosts: []string{}, MasterPort: topology.DefaultPort},
		},
		{
			name: "mpirun.mpich -n 4 -ppn 1 (round robin) inside sbatch: the daemon step's SLURM_NODEID places rank 1",
			env: env(sbatchJob, map[string]string{"SLURM_STEP_ID": "4", "SLURM_PROCID": "1", "SLURM_NODEID": "1", "SLURM_STEP_NODELIST": "node[1-2]",
				"SLURM_STEP_NUM_NODES": "2"}, hydraRank("1", "4", "0", "2")),
			want: topology.Topology{Launcher: topology.Hydra, Rank: 1, WorldSize: 4, LocalRank: 0, LocalWorldSize: 2,
				NodeRank: 1, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port42, JobID: "42"},
		},
		{
			// Blocks of 1 would make 3 nodes in a 2-node allocation: the
			// layout cannot tell, the daemon step places it.
			name: "mpirun.mpich -n 3 -ppn 1 (round robin) inside sbatch: rank 1 alone on node2, 2 nodes",
			env: env(sbatchJob, map[string]string{"SLURM_STEP_ID": "4", "SLURM_PROCID": "1", "SLURM_NODEID": "1", "SLURM_STEP_NODELIST": "node[1-2]",
				"SLURM_STEP_NUM_NODES": "2"}, hydraRank("1", "3", "0", "1")),
			want: topology.Topology{Launcher: topology.Hydra, Rank: 1, WorldSize: 3, LocalRank: 0, LocalWorldSize: 1,
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
			// Rank 3 is on a full node; rank 5, on the last, could not tell
			// -n 6 -ppn 2 from -n 6 -ppn 4 (see TestDetectErrors).
			name: "MVAPICH2 mpirun_rsh with MASTER_ADDR given",
			env: env(map[string]string{"MV2_COMM_WORLD_RANK": "3", "MV2_COMM_WORLD_SIZE": "6", "MV2_COMM_WORLD_LOCAL_RANK": "1",
				"MV2_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "head"}),
			want: topology.Topology{Launcher: topology.MVAPICH, Rank: 3, WorldSize: 6, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 1, NumNodes: 3, Hosts: []string{}, MasterAddr: "head", MasterPort: topology.DefaultPort},
		},
		{
			name: "Open MPI mpirun on node1 inside sbatch, rank 1 on node2: the daemon step leaves out mpirun's node",
			env:  env(ompiSkippedNodeJob, ompiSkippedNodeStep, ompiSkippedNodeRank("1")),
			want: topology.Topology{Launcher: topology.OpenMPI, Rank: 1, WorldSize: 2, LocalRank: 0, LocalWorldSize: 1,
				NodeRank: 1, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port77, JobID: "77"},
		},
		{
			name: "Open MPI mpirun on node1 inside sbatch, rank 0 beside mpirun: no step at all",
			env:  env(ompiSkippedNodeJob, ompiSkippedNodeRank("0")),
			want: topology.Topology{Launcher: topology.OpenMPI, Rank: 0, WorldSize: 2, LocalRank: 0, LocalWorldSize: 1,
				NodeRank: 0, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port77, JobID: "77"},
		},
		{
			name: "mpirun.mpich -n 3 -ppn 2 in a 3-node allocation: the layout is ambiguous, Hydra's proxy step places rank 2",
			env: env(sbatchJob, map[string]string{"SLURM_JOB_NODELIST": "node[1-3]", "SLURM_NODELIST": "node[1-3]",
				"SLURM_JOB_NUM_NODES": "3", "SLURM_NNODES": "3", "SLURM_NTASKS": "6", "SLURM_NPROCS": "6", "SLURM_TASKS_PER_NODE": "2(x3)",
				"SLURM_STEP_ID": "3", "SLURM_PROCID": "1", "SLURM_NODEID": "1", "SLURM_STEP_NODELIST": "node[1-2]", "SLURM_STEP_NUM_NODES": "2"},
				hydraRank("2", "3", "0", "1")),
			want: topology.Topology{Launcher: topology.Hydra, Rank: 2, WorldSize: 3, LocalRank: 0, LocalWorldSize: 1,
				NodeRank: 1, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: port42, JobID: "42"},
		},
		{
			name: "mpirun.mpich -bootstrap fork -n 3 -ppn 2, rank 1 on the full first node",
			env:  env(hydraRank("1", "3", "1", "2")),
			want: topology.Topology{Launcher: topology.Hydra, Rank: 1, WorldSize: 3, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 0, NumNodes: 2, Hosts: []string{}, MasterPort: topology.DefaultPort},
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
			if diff := cmp.Diff(tt.want, got, placementOnly); diff != "" {
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
		// A size of 0 is an error naming the variable, never a division by zero.
		{"MPI_LOCALNRANKS=0",
			env(hydraRank("0", "4", "0", "0")),
			[]string{`MPI_LOCALNRANKS="0"`, "at least 1"}},
		{"PMI_SIZE=0",
			env(hydraRank("0", "0", "0", "1")),
			[]string{`PMI_SIZE="0"`, "at least 1"}},
		{"OMPI_COMM_WORLD_LOCAL_SIZE=0",
			env(map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "0"}),
			[]string{`OMPI_COMM_WORLD_LOCAL_SIZE="0"`, "at least 1"}},
		{"OMPI_MCA_orte_num_nodes=0",
			env(ompiRank("1", "1"), map[string]string{"OMPI_MCA_orte_num_nodes": "0"}),
			[]string{`OMPI_MCA_orte_num_nodes="0"`, "at least 1"}},
		{"MV2_COMM_WORLD_LOCAL_SIZE=0",
			env(map[string]string{"MV2_COMM_WORLD_RANK": "1", "MV2_COMM_WORLD_SIZE": "2", "MV2_COMM_WORLD_LOCAL_RANK": "0", "MV2_COMM_WORLD_LOCAL_SIZE": "0"}),
			[]string{`MV2_COMM_WORLD_LOCAL_SIZE="0"`, "at least 1"}},
		{"PMI_LOCAL_SIZE=0 under PALS",
			env(map[string]string{"PALS_RANKID": "1", "PMI_SIZE": "2", "PALS_LOCAL_RANKID": "0", "PMI_LOCAL_SIZE": "0"}),
			[]string{`PMI_LOCAL_SIZE="0"`, "at least 1"}},
		{"LOCAL_WORLD_SIZE=0",
			env(map[string]string{"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "0"}),
			[]string{`LOCAL_WORLD_SIZE="0"`, "at least 1"}},
		{"WORLD_SIZE=0",
			env(map[string]string{"RANK": "0", "WORLD_SIZE": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}),
			[]string{`WORLD_SIZE="0"`, "at least 1"}},
		{"GROUP_WORLD_SIZE=0",
			env(map[string]string{"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "GROUP_WORLD_SIZE": "0"}),
			[]string{`GROUP_WORLD_SIZE="0"`, "at least 1"}},
		{"SLURM_NTASKS=0 in a step",
			env(srunTask("0", "0", "0", "0", "0", "1")),
			[]string{`SLURM_STEP_NUM_TASKS="0"`, "at least 1"}},
		{"local rank beyond the local size names the variable",
			env(hydraRank("3", "4", "3", "2")),
			[]string{`MPI_LOCALRANKID="3"`, "out of range", "MPI_LOCALNRANKS=2"}},
		{"local size beyond the world",
			env(hydraRank("0", "2", "0", "3")),
			[]string{`MPI_LOCALNRANKS="3"`, "out of range", "PMI_SIZE=2"}},
		{"GROUP_RANK beyond GROUP_WORLD_SIZE",
			env(map[string]string{"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "2", "GROUP_WORLD_SIZE": "2"}),
			[]string{`GROUP_RANK="2"`, "out of range for 2 nodes"}},
		// The last node's rank alone cannot tell -n 3 -ppn 2 from -n 3 -ppn 1,
		// nor -n 6 -ppn 2 from -n 6 -ppn 4; the ranks on full nodes can, so a
		// guess would make them disagree on the node count.
		{"mpirun.mpich -bootstrap fork -n 3 -ppn 2, rank 2 alone on the last node",
			env(hydraRank("2", "3", "0", "1")),
			[]string{"cannot tell which node rank 2 is on", "node 2 of 3 or node 1 of 2"}},
		{"mpirun_rsh -n 6 -ppn 2, rank 5 on the last node",
			env(map[string]string{"MV2_COMM_WORLD_RANK": "5", "MV2_COMM_WORLD_SIZE": "6", "MV2_COMM_WORLD_LOCAL_RANK": "1", "MV2_COMM_WORLD_LOCAL_SIZE": "2"}),
			[]string{"mvapich environment", "cannot tell which node rank 5 is on", "node 2 of 3 or node 1 of 2"}},
		{"the allocation bound still leaves two layouts",
			env(sbatchJob, map[string]string{"SLURM_JOB_NODELIST": "node[1-3]", "SLURM_JOB_NUM_NODES": "3", "SLURM_NODELIST": "node[1-3]", "SLURM_NNODES": "3"},
				hydraRank("2", "3", "0", "1")),
			[]string{"cannot tell which node rank 2 is on"}},
		{"Open MPI's node count contradicts the blocks",
			env(ompiRank("1", "1"), map[string]string{"OMPI_MCA_orte_num_nodes": "3"}),
			[]string{"blocks of 2 make 2 nodes but the launcher counts 3"}},
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

// torchrun variables next to another launcher's: torchrun wins only when the
// two are consistent, else they are stale (eval "$(batchkit env --format
// shell)" in a batch script, then mpirun or srun).
func TestTorchrunUnderAnotherLauncher(t *testing.T) {
	torchrun := func(rank, size, local, localSize string) map[string]string {
		return map[string]string{"RANK": rank, "WORLD_SIZE": size, "LOCAL_RANK": local, "LOCAL_WORLD_SIZE": localSize}
	}
	stale := torchrun("0", "1", "0", "1") // what the batch script's shell exported
	tests := []struct {
		name    string
		env     topology.Getenv
		rank    int      // the rank detected, when wantErr is empty
		wantErr []string // substrings of the one-line error
	}{
		{name: "batchkit exec under srun: both agree",
			env:  env(srunTask("3", "1", "1", "4", "2(x2)", "2"), torchrun("3", "4", "1", "2")),
			rank: 3},
		{name: "batchkit exec under mpirun.mpich: both agree",
			env:  env(hydraRank("2", "4", "0", "2"), torchrun("2", "4", "0", "2")),
			rank: 2},
		{name: "batchkit run -n 4 inside a one-task srun step: nested, torchrun wins",
			env: env(srunTask("0", "0", "0", "1", "1", "1"), torchrun("3", "4", "3", "4"),
				map[string]string{"SLURM_JOB_NODELIST": "node1", "SLURM_STEP_NODELIST": "node1"}),
			rank: 3},
		{name: "torchrun --nproc-per-node 4 inside mpirun -n 1: nested, torchrun wins",
			env:  env(hydraRank("0", "1", "0", "1"), torchrun("2", "4", "2", "4")),
			rank: 2},
		{name: "srun -N2 --ntasks-per-node=1 torchrun --nproc-per-node 4: one agent per node",
			env:  env(srunTask("1", "0", "1", "2", "1(x2)", "2"), torchrun("6", "8", "2", "4"), map[string]string{"GROUP_RANK": "1"}),
			rank: 6},
		// A run id marks a real inner launcher: torchrun's c10d rendezvous
		// and batchkit run number their ranks their own way.
		{name: "srun -N2 --ntasks-per-node=1 batchkit run -n 2: equal sizes, other ranks, the run id says nested",
			env: env(srunTask("0", "0", "0", "2", "1(x2)", "2"), torchrun("1", "2", "1", "2"),
				map[string]string{"TORCHELASTIC_RUN_ID": "batchkit-run-7-1"}),
			rank: 1},
		{name: "srun -n2 torchrun --nproc-per-node 1: c10d numbers the agents in arrival order",
			env: env(srunTask("0", "0", "0", "2", "1(x2)", "2"), torchrun("1", "2", "0", "1"),
				map[string]string{"GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x"}),
			rank: 1},
		{name: "the same without a run id: taken for leftovers",
			env:     env(srunTask("0", "0", "0", "2", "1(x2)", "2"), torchrun("1", "2", "1", "2")),
			wantErr: []string{"RANK=1 WORLD_SIZE=2 (torchrun) disagree with SLURM_PROCID=0"}},
		{name: "Open MPI inside sbatch: compared with Open MPI, not the daemons' stale step",
			env:  env(sbatchJob, ompiDaemonStep("1"), ompiRank("3", "1"), torchrun("3", "4", "1", "2")),
			rank: 3},
		{name: "the batch script itself (no step): nothing to compare",
			env:  env(sbatchJob, stale),
			rank: 0},
		{name: "stale rank 0 of 1 under mpirun.mpich -n 2",
			env:     env(stale, hydraRank("1", "2", "1", "2")),
			wantErr: []string{"RANK=0 WORLD_SIZE=1 (torchrun) disagree with PMI_RANK=1 PMI_SIZE=2 (hydra)", "unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE"}},
		{name: "stale rank 0 of 1 under Open MPI",
			env:     env(sbatchJob, ompiDaemonStep("0"), ompiRank("1", "1"), stale),
			wantErr: []string{"disagree with OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=4 (openmpi)"}},
		{name: "stale rank 0 of 1 under srun -n 4",
			env:     env(srunTask("2", "0", "1", "4", "2(x2)", "2"), stale),
			wantErr: []string{"disagree with SLURM_PROCID=2 SLURM_STEP_NUM_TASKS=4 (slurm)"}},
		{name: "stale rank 0 of 1 under srun --mpi=pmi2: Slurm is the launcher",
			env:     env(srunTask("1", "1", "0", "2", "2", "1"), hydraRank("1", "2", "", ""), stale),
			wantErr: []string{"disagree with SLURM_PROCID=1 SLURM_STEP_NUM_TASKS=2 (slurm)"}},
		{name: "stale --allocation shape: same size, other rank",
			env:     env(torchrun("0", "4", "0", "2"), hydraRank("3", "4", "1", "2")),
			wantErr: []string{"RANK=0 WORLD_SIZE=4 (torchrun) disagree with PMI_RANK=3 PMI_SIZE=4"}},
		{name: "stale under MVAPICH2",
			env: env(stale, map[string]string{"MV2_COMM_WORLD_RANK": "1", "MV2_COMM_WORLD_SIZE": "2",
				"MV2_COMM_WORLD_LOCAL_RANK": "0", "MV2_COMM_WORLD_LOCAL_SIZE": "1"}),
			wantErr: []string{"disagree with MV2_COMM_WORLD_RANK=1 MV2_COMM_WORLD_SIZE=2 (mvapich)"}},
		{name: "stale under Cray PALS",
			env:     env(stale, map[string]string{"PALS_RANKID": "1", "PMI_SIZE": "2", "PALS_LOCAL_RANKID": "0", "PMI_LOCAL_SIZE": "1"}),
			wantErr: []string{"disagree with PALS_RANKID=1 PMI_SIZE=2 (pals)"}},
		{name: "torchrun smaller than its launcher cannot be nested",
			env:     env(torchrun("1", "2", "1", "2"), hydraRank("1", "4", "1", "2")),
			wantErr: []string{"RANK=1 WORLD_SIZE=2 (torchrun) disagree with PMI_RANK=1 PMI_SIZE=4"}},
		{name: "the outer launcher's variables are still checked",
			env:     env(torchrun("1", "4", "1", "4"), hydraRank("1", "2", "0", "1"), map[string]string{"PMI_ID": "0"}),
			wantErr: []string{"conflicting rank", "PMI_RANK=1", "PMI_ID=0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.env, Options{})
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Detect: %v", err)
				}
				if diff := cmp.Diff(struct {
					L    topology.Launcher
					Rank int
				}{topology.Torchrun, tt.rank}, struct {
					L    topology.Launcher
					Rank int
				}{got.Launcher, got.Rank}); diff != "" {
					t.Errorf("Detect (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("Detect = %+v, want an error", got)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// No combination of small values panics: each either detects a valid
// topology or fails with one line.
func TestSmallValuesNeverPanic(t *testing.T) {
	layers := []func(r, s, l, ls string) map[string]string{
		func(r, s, l, ls string) map[string]string {
			return map[string]string{"RANK": r, "WORLD_SIZE": s, "LOCAL_RANK": l, "LOCAL_WORLD_SIZE": ls}
		},
		func(r, s, l, ls string) map[string]string { return hydraRank(r, s, l, ls) },
		func(r, s, l, ls string) map[string]string {
			return map[string]string{"OMPI_COMM_WORLD_RANK": r, "OMPI_COMM_WORLD_SIZE": s, "OMPI_COMM_WORLD_LOCAL_RANK": l,
				"OMPI_COMM_WORLD_LOCAL_SIZE": ls, "OMPI_MCA_orte_num_nodes": ls}
		},
		func(r, s, l, ls string) map[string]string {
			return map[string]string{"MV2_COMM_WORLD_RANK": r, "MV2_COMM_WORLD_SIZE": s, "MV2_COMM_WORLD_LOCAL_RANK": l, "MV2_COMM_WORLD_LOCAL_SIZE": ls}
		},
		func(r, s, l, ls string) map[string]string {
			return map[string]string{"PALS_RANKID": r, "PMI_SIZE": s, "PALS_LOCAL_RANKID": l, "PMI_LOCAL_SIZE": ls, "PALS_NODEID": l}
		},
		func(r, s, l, ls string) map[string]string { return srunTask(r, l, ls, s, ls+","+r, "2") },
		func(r, s, l, ls string) map[string]string {
			return map[string]string{"SLURM_JOB_ID": "1", "SLURM_NTASKS": s, "SLURM_TASKS_PER_NODE": ls + "," + l, "SLURM_JOB_NODELIST": "n[1-2]"}
		},
	}
	around := []map[string]string{
		nil,
		sbatchJob,
		ompiSkippedNodeStep,
		{"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_NODEID": "1", "SLURM_STEP_NODELIST": "n[1-3]", "SLURM_JOB_NODELIST": "n[1-3]"},
	}
	n := strconv.Itoa
	for li, layer := range layers {
		for _, base := range around {
			for r := 0; r < 4; r++ {
				for s := 0; s < 4; s++ {
					for l := 0; l < 4; l++ {
						for ls := 0; ls < 4; ls++ {
							e := env(base, layer(n(r), n(s), n(l), n(ls)))
							for _, opts := range []Options{{}, {Allocation: true, Hostname: "h"}} {
								func() {
									defer func() {
										if p := recover(); p != nil {
											t.Fatalf("layer %d rank %d size %d local %d of %d over %v: panic %v", li, r, s, l, ls, base, p)
										}
									}()
									got, err := Detect(e, opts)
									if err != nil && strings.Contains(err.Error(), "\n") {
										t.Errorf("error is not one line: %q", err)
									}
									if err == nil {
										if verr := got.Validate(); verr != nil {
											t.Errorf("Detect returned an invalid topology %+v: %v", got, verr)
										}
									}
								}()
							}
						}
					}
				}
			}
		}
	}
	for rank := -1; rank < 4; rank++ {
		for local := -1; local < 4; local++ {
			for localSize := -1; localSize < 4; localSize++ {
				for world := -1; world < 4; world++ {
					for numNodes := -1; numNodes < 4; numNodes++ {
						for hint := 0; hint < 4; hint++ {
							node, nodes, err := placeBlock(rank, local, localSize, world, numNodes, hint)
							if err == nil && (nodes < 1 || node < 0 || node >= nodes || nodes > world) {
								t.Errorf("placeBlock(%d, %d, %d, %d, %d, %d) = node %d of %d", rank, local, localSize, world, numNodes, hint, node, nodes)
							}
						}
					}
				}
			}
		}
	}
}

// batchkit exec exports the torchrun contract over its launcher's
// variables; the next batchkit (train under exec) reads the torchrun layer,
// which has no job id of its own. Where it restates the launcher it keeps
// the launcher's job and step id, which its job token and port derive from
// (issue 30, item 13: under Open MPI it found none, "no job token").
func TestTorchrunRestatingItsLauncherKeepsItsJob(t *testing.T) {
	torchrun := func(rank, size, local, localSize string) map[string]string {
		return map[string]string{"RANK": rank, "WORLD_SIZE": size, "LOCAL_RANK": local, "LOCAL_WORLD_SIZE": localSize}
	}
	type job struct {
		Launcher      topology.Launcher
		JobID, StepID string
	}
	tests := []struct {
		name string
		env  topology.Getenv
		want job
	}{
		{"batchkit exec under Open MPI's mpirun: PMIX_NAMESPACE",
			env(ompiRank("3", "1"), torchrun("3", "4", "1", "2"), map[string]string{"OMPI_MCA_ess_base_jobid": "1231355905"}),
			job{topology.Torchrun, "1231355905", ""}},
		{"batchkit exec under Hydra: PMI_KVSNAME",
			env(hydraRank("2", "4", "0", "2"), torchrun("2", "4", "0", "2"), map[string]string{"PMI_KVSNAME": "kvs_4711_0"}),
			job{topology.Torchrun, "kvs_4711_0", ""}},
		{"batchkit exec under srun: the job and the step",
			env(srunTask("3", "1", "1", "4", "2(x2)", "2"), torchrun("3", "4", "1", "2"), map[string]string{"SLURM_STEP_ID": "5"}),
			job{topology.Torchrun, "7", "5"}},
		{"batchkit exec under srun --mpi=pmi2: Slurm's step, not the PMI layer",
			env(srunTask("1", "1", "0", "2", "2", "1"), hydraRank("1", "2", "", ""), torchrun("1", "2", "1", "2"),
				map[string]string{"PMI_KVSNAME": "kvs_9_0", "SLURM_STEP_ID": "3"}),
			job{topology.Torchrun, "7", "3"}},
		{"torchrun nested in mpirun -n 1 (a larger world): its own run, no job id taken",
			env(hydraRank("0", "1", "0", "1"), torchrun("2", "4", "2", "4"), map[string]string{"PMI_KVSNAME": "kvs_1_0"}),
			job{topology.Torchrun, "", ""}},
		{"a run id: the inner launcher's",
			env(ompiRank("3", "1"), torchrun("3", "4", "1", "2"), map[string]string{"TORCHELASTIC_RUN_ID": "run-9"}),
			job{topology.Torchrun, "run-9", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.env, Options{})
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			if diff := cmp.Diff(tt.want, job{got.Launcher, got.JobID, got.StepID}); diff != "" {
				t.Errorf("Detect (-want +got):\n%s", diff)
			}
		})
	}
}
