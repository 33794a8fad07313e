package sbatch_test

import (
	"fmt"
	"strings"

	"github.com/batchkit/batchkit/launch/sbatch"
	"github.com/batchkit/batchkit/profile"
	"github.com/batchkit/batchkit/slurm"
)

// builtin resolves one of the profiles built into batchkit; a real caller
// uses profile.NewLoader(os.Getenv), which searches the user's and the
// site's directories first.
func builtin(name string) (*profile.Resolved, error) {
	l := &profile.Loader{Embedded: profile.NewLoader(func(string) string { return "" }).Embedded}
	return l.Resolve(name)
}

// The batch job `batchkit sbatch --profile intel-oneccl -N 2
// --ntasks-per-node 4 --time 1:00:00 -- python3 train.py` would submit:
// the profile adds --exclusive, the flags the rest, and every rank runs
// through `batchkit exec`, started by the profile's Intel MPI (its Hydra
// bootstraps through the allocation). Only the #SBATCH lines and the
// launch line of the script are printed; the rest sources the profile's
// environment scripts and forwards signals.
func ExampleNewPlan() {
	r, err := builtin("intel-oneccl")
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := sbatch.NewPlan(sbatch.Request{
		ProfileName: r.Name,
		Profile:     r.Profile,
		Job:         slurm.JobOptions{JobName: "train", Nodes: "2", NTasksPerNode: 4, Time: "1:00:00"},
		Program:     []string{"python3", "train.py"},
		Batchkit:    "/usr/bin/batchkit",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for line := range strings.Lines(p.Text) {
		if strings.HasPrefix(line, "#SBATCH") || !strings.HasPrefix(line, "#") && strings.Contains(line, "batchkit exec") {
			fmt.Print(line)
		}
	}
	// Output:
	// #SBATCH --exclusive
	// #SBATCH --job-name=train
	// #SBATCH --nodes=2
	// #SBATCH --ntasks-per-node=4
	// #SBATCH --time=1:00:00
	// (trap '' USR1; exec mpirun -bootstrap slurm -n 8 -ppn 4 -disable-auto-cleanup /usr/bin/batchkit exec -- python3 train.py) &
}

// Script is the same decision as data, before a template lays it out. A
// flag overrides the profile's value the way the CLI's do (Set with
// profile.CommandLine): here srun starts the ranks instead of mpirun, with
// the --mpi plugin of the profile's Open MPI and a failed rank ending the
// step. The profile's time limit applies, as no flag sets one.
func ExampleScript() {
	r, err := builtin("generic-openmpi")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := r.Set("mpi.launcher", "srun", profile.CommandLine); err != nil {
		fmt.Println(err)
		return
	}
	s, err := sbatch.Script(sbatch.Request{
		ProfileName: r.Name,
		Profile:     r.Profile,
		Job:         slurm.JobOptions{Nodes: "2", NTasksPerNode: 4, Partition: "gpu"},
		Program:     []string{"python3", "train.py"},
		Batchkit:    "/usr/bin/batchkit",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range s.Directives {
		fmt.Printf("--%s=%s\n", d.Flag, d.Value)
	}
	fmt.Printf("%q\n", s.Launch)
	// Output:
	// --nodes=2
	// --ntasks-per-node=4
	// --time=01:00:00
	// --partition=gpu
	// ["env" "SLURM_KILL_BAD_EXIT=1" "srun" "--mpi=pmix" "--export=ALL" "/usr/bin/batchkit" "exec" "--" "python3" "train.py"]
}
