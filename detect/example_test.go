package detect_test

import (
	"fmt"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/topology"
)

// Rank 3 of an Open MPI mpirun -n 4 --map-by ppr:2:node inside a two-node
// Slurm job: Open MPI's variables give the rank, the job's node list the
// master address, the job id the port.
func ExampleDetect() {
	env := topology.MapEnv(map[string]string{
		"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
		"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
		"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu[01-02]",
	})
	t, err := detect.Detect(env, detect.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s rank %d of %d, node %d of %d\n", t.Launcher, t.Rank, t.WorldSize, t.NodeRank, t.NumNodes)
	fmt.Printf("master %s:%d\n", t.MasterAddr, t.MasterPort)
	// Output:
	// openmpi rank 3 of 4, node 1 of 2
	// master gpu01:19242
}

// Task 2 of srun -n 3 on two nodes, which Slurm lays out 2+1
// (SLURM_STEP_TASKS_PER_NODE=2,1): srun's variables say everything, the
// node list gives the hosts, rank 0's host is the master and the job id
// the port.
func ExampleDetect_srun() {
	env := topology.MapEnv(map[string]string{
		"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0",
		"SLURM_JOB_NODELIST": "cn[07-08]", "SLURM_STEP_NODELIST": "cn[07-08]",
		"SLURM_PROCID": "2", "SLURM_LOCALID": "0", "SLURM_NODEID": "1",
		"SLURM_NTASKS": "3", "SLURM_STEP_NUM_TASKS": "3",
		"SLURM_STEP_TASKS_PER_NODE": "2,1", "SLURM_TASKS_PER_NODE": "2,1",
		"SLURM_STEP_NUM_NODES": "2", "SLURM_JOB_NUM_NODES": "2",
	})
	t, err := detect.Detect(env, detect.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s rank %d of %d, local %d of %d, node %d of %d %v\n", t.Launcher,
		t.Rank, t.WorldSize, t.LocalRank, t.LocalWorldSize, t.NodeRank, t.NumNodes, t.Hosts)
	fmt.Printf("master %s:%d\n", t.MasterAddr, t.MasterPort)
	// Output:
	// slurm rank 2 of 3, local 0 of 1, node 1 of 2 [cn07 cn08]
	// master cn07:15077
}

// srun -N2 --ntasks-per-node=1 torchrun --nproc-per-node 4: torchrun's
// variables (the torchrun contract) win over the srun task that started
// its agent, since the two agree (node 1's agent, its 4 workers 4-7);
// the MASTER_ADDR and MASTER_PORT torchrun sets win too.
func ExampleDetect_torchrun() {
	env := topology.MapEnv(map[string]string{
		"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0",
		"SLURM_JOB_NODELIST": "node[1-2]", "SLURM_STEP_NODELIST": "node[1-2]",
		"SLURM_PROCID": "1", "SLURM_LOCALID": "0", "SLURM_NODEID": "1",
		"SLURM_NTASKS": "2", "SLURM_STEP_NUM_TASKS": "2",
		"SLURM_STEP_TASKS_PER_NODE": "1(x2)", "SLURM_TASKS_PER_NODE": "1(x2)",
		"SLURM_STEP_NUM_NODES": "2", "SLURM_JOB_NUM_NODES": "2",
		"RANK": "6", "WORLD_SIZE": "8", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4",
		"GROUP_RANK": "1", "MASTER_ADDR": "node1", "MASTER_PORT": "29500",
	})
	t, err := detect.Detect(env, detect.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s rank %d of %d, local %d of %d, node %d of %d\n", t.Launcher,
		t.Rank, t.WorldSize, t.LocalRank, t.LocalWorldSize, t.NodeRank, t.NumNodes)
	fmt.Printf("master %s:%d\n", t.MasterAddr, t.MasterPort)
	// Output:
	// torchrun rank 6 of 8, local 2 of 4, node 1 of 2
	// master node1:29500
}

// Rank 3 of Intel MPI's mpirun -n 4 -ppn 2 inside a two-node batch job
// (variables of a real rank, from testdata/intelmpi/sbatch-hydra-rank3.env):
// Hydra started its proxies as a one-task-per-node srun step, whose
// SLURM_PROCID=1 is the proxy's, not the rank's. Hydra's PMI_RANK and
// MPI_LOCALRANKID are the rank's; the step still gives the node.
func ExampleDetect_intelMPI() {
	env := topology.MapEnv(map[string]string{
		"PMI_RANK": "3", "PMI_SIZE": "4", "PMI_FD": "6",
		"MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2",
		"HYDRA_BSTRAP_LAUNCHER": "slurm", "HYDRA_BSTRAP_PROXY_ID": "1",
		"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_JOB_NUM_NODES": "2",
		"SLURM_NTASKS": "4", "SLURM_TASKS_PER_NODE": "1(x2)",
		"SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "node[1-2]", "SLURM_STEP_NUM_NODES": "2",
		"SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
		"SLURM_PROCID": "1", "SLURM_LOCALID": "0", "SLURM_NODEID": "1",
	})
	t, err := detect.Detect(env, detect.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s rank %d of %d, local %d of %d, node %d of %d\n", t.Launcher,
		t.Rank, t.WorldSize, t.LocalRank, t.LocalWorldSize, t.NodeRank, t.NumNodes)
	fmt.Printf("master %s:%d\n", t.MasterAddr, t.MasterPort)
	// Output:
	// hydra rank 3 of 4, local 1 of 2, node 1 of 2
	// master node1:15012
}
