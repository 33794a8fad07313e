package collective_test

import (
	"fmt"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective"
)

// A rank finds its place with detect.Detect, joins the world with Init, and
// averages its gradients with every other rank. Started alone (no launcher
// variables) it is a world of one on the self backend; under batchkit run,
// mpirun or srun the same code joins the others over TCP or MPI.
func ExampleInit() {
	topo, err := detect.Detect(topology.MapEnv(nil), detect.Options{Hostname: "localhost"})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := collective.Init(collective.Config{Topology: topo})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	grads := []float32{0.5, -1, 2}
	if err := collective.Allreduce(c, grads, grads, collective.Avg); err != nil { // in place
		fmt.Println(err)
		return
	}
	fmt.Printf("rank %d of %d on %s: %v\n", c.Rank(), c.Size(), c.Backend(), grads)
	// Output: rank 0 of 1 on self: [0.5 -1 2]
}

// Allgather concatenates every rank's slice in rank order (here a world of
// one, described directly rather than detected).
func ExampleAllgather() {
	c, err := collective.Init(collective.Config{Topology: topology.Topology{
		Launcher: topology.Single, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	mine := []float64{1, 2}
	all := make([]float64, len(mine)*c.Size())
	if err := collective.Allgather(c, mine, all); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(all)
	// Output: [1 2]
}
