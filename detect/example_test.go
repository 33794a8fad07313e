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
