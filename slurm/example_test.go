package slurm_test

import (
	"fmt"

	"github.com/batchkit/batchkit/slurm"
)

// A job's node list, as SLURM_JOB_NODELIST gives it, expanded into host
// names in Slurm's order, zero padding kept, and compressed back.
func ExampleExpandHostlist() {
	hosts, err := slurm.ExpandHostlist("gpu[01-03,07],login1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(hosts)
	fmt.Println(slurm.CompressHostlist(hosts))

	_, err = slurm.ExpandHostlist("gpu[01-03")
	fmt.Println(err)
	// Output:
	// [gpu01 gpu02 gpu03 gpu07 login1]
	// gpu[01-03,07],login1
	// invalid hostlist "gpu[01-03": '[' at offset 3 is never closed
}

// CompressHostlist is `scontrol show hostlist`: it neither sorts nor
// deduplicates, so the order of the list survives the round trip.
func ExampleCompressHostlist() {
	fmt.Println(slurm.CompressHostlist([]string{"n1", "n2", "n3", "n5"}))
	fmt.Println(slurm.CompressHostlist([]string{"n3", "n1", "n2"}))
	fmt.Println(slurm.CompressHostlist([]string{"n08", "n09", "n10"}))
	// Output:
	// n[1-3,5]
	// n[3,1-2]
	// n[08-10]
}

// SLURM_TASKS_PER_NODE of sbatch -N4 -n7: three nodes with two tasks and
// one with one, a count per node in node-list order.
func ExampleParseTasksPerNode() {
	counts, err := slurm.ParseTasksPerNode("2(x3),1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(counts)
	// Output:
	// [2 2 2 1]
}

// The #SBATCH lines of a job: named options in a fixed order, a site's
// extra directives (a profile's extra_sbatch) before them and the user's
// (--sbatch-arg) after, so that sbatch, which takes the last of repeated
// directives, lets the user's win.
func ExampleJobOptions_Directives() {
	job := slurm.JobOptions{
		JobName: "train", Nodes: "2", NTasksPerNode: 4, Time: "1:00:00",
		SiteExtra: []string{"--partition=gpu"},
		Extra:     []string{"--partition debug"},
	}
	ds, err := job.Directives()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range ds {
		if d.Value == "" {
			fmt.Printf("#SBATCH --%s\n", d.Flag)
			continue
		}
		fmt.Printf("#SBATCH --%s=%s\n", d.Flag, d.Value)
	}
	// Output:
	// #SBATCH --partition=gpu
	// #SBATCH --job-name=train
	// #SBATCH --nodes=2
	// #SBATCH --ntasks-per-node=4
	// #SBATCH --time=1:00:00
	// #SBATCH --partition=debug
}
