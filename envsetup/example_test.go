package envsetup_test

import (
	"fmt"
	"maps"
	"slices"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/envsetup/intelgpu"
	"github.com/batchkit/batchkit/topology"
)

// printVars prints variables sorted by name, one a line.
func printVars(vars map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		fmt.Printf("%s=%s\n", k, vars[k])
	}
}

// Local rank 1 of the 2 ranks srun started on a node of 2 sockets × 4
// cores × 2 hardware threads (CPUs 0-7 are the cores' first threads, 8-15
// their siblings), both allowed the whole node: each rank takes half the
// cores, one of them for its oneCCL worker (the last of its slice) and the
// rest for OpenMP threads, one per core on its first hardware thread.
// CCL_WORKER_AFFINITY and I_MPI_PIN_DOMAIN list both local ranks' (oneCCL
// and Intel MPI pick their own by local rank); the masks include the
// siblings. A real rank
// reads its CPUs with envsetup.ReadCPUs("/") and its topology with
// detect.Detect.
func ExamplePinning() {
	var cpus envsetup.CPUSet
	for id := range 16 {
		cpus.Allowed = append(cpus.Allowed, envsetup.CPU{ID: id, Core: id % 4, Socket: id % 8 / 4})
	}
	cpus.Online = 16
	t := topology.Topology{Launcher: topology.Slurm, Rank: 3, WorldSize: 4,
		LocalRank: 1, LocalWorldSize: 2, NodeRank: 1, NumNodes: 2}
	getenv := topology.MapEnv(nil) // nothing set by the user

	set, _ := envsetup.Pinning(t, cpus, envsetup.PinOptions{Workers: 1}, getenv)
	printVars(set)

	// A value the user exported wins, with a warning.
	getenv = topology.MapEnv(map[string]string{"OMP_NUM_THREADS": "8"})
	set, warnings := envsetup.Pinning(t, cpus, envsetup.PinOptions{Workers: 1}, getenv)
	_, ok := set["OMP_NUM_THREADS"]
	fmt.Println("sets OMP_NUM_THREADS:", ok)
	for _, w := range warnings {
		fmt.Println(w)
	}
	// Output:
	// CCL_ATL_TRANSPORT=ofi
	// CCL_LOCAL_RANK=1
	// CCL_LOCAL_SIZE=2
	// CCL_PROCESS_LAUNCHER=none
	// CCL_WORKER_AFFINITY=3,7
	// CCL_WORKER_COUNT=1
	// I_MPI_PIN_DOMAIN=[F0F,F0F0]
	// KMP_BLOCKTIME=1
	// OMP_NUM_THREADS=3
	// OMP_PLACES={4},{5},{6}
	// OMP_PROC_BIND=close
	// sets OMP_NUM_THREADS: false
	// pinning: keeping OMP_NUM_THREADS=8 from the environment (batchkit computed 3)
}

// Four local ranks on a node of four two-tile Data Center GPU Max cards
// (and the processor's integrated graphics, never given out). Level Zero's
// default FLAT hierarchy shows 8 devices, one per tile: every rank gets the
// same mask of one device per card (each card's first tile), so that
// xpu:LOCAL_RANK is its own card. With ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE
// a device is a card, numbered discrete cards first: the mask lists the
// four cards and hides the integrated graphics, Level Zero's device 4.
// A real rank reads its cards with intelgpu.Read("/").
func ExampleDeviceAffinity() {
	cards := []intelgpu.Card{{Name: "card0", PCI: "0000:00:02.0", Integrated: true, Tiles: 1, Usable: true}}
	for i := range 4 {
		cards = append(cards, intelgpu.Card{
			Name: fmt.Sprintf("card%d", i+1), Render: fmt.Sprintf("renderD%d", 129+i),
			PCI: fmt.Sprintf("0000:%02x:00.0", 0x18+i*0x20), Driver: "xe", Tiles: 2, Usable: true,
		})
	}
	t := topology.Topology{Launcher: topology.Torchrun, Rank: 2, WorldSize: 4,
		LocalRank: 2, LocalWorldSize: 4, NumNodes: 1}

	for _, hierarchy := range []string{"", "COMPOSITE"} {
		env := topology.MapEnv(map[string]string{"ZE_FLAT_DEVICE_HIERARCHY": hierarchy})
		set, warnings := envsetup.DeviceAffinity(t, cards, env)
		fmt.Printf("ZE_FLAT_DEVICE_HIERARCHY=%q: %v %v\n", hierarchy, set, warnings)
	}
	// Output:
	// ZE_FLAT_DEVICE_HIERARCHY="": map[ZE_AFFINITY_MASK:0,2,4,6] []
	// ZE_FLAT_DEVICE_HIERARCHY="COMPOSITE": map[ZE_AFFINITY_MASK:0,1,2,3] []
}
