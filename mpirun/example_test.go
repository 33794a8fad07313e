package mpirun_test

import (
	"fmt"
	"strings"

	"github.com/batchkit/batchkit/mpirun"
)

// One request, two flavors: 8 ranks, 4 per node on two hosts, a variable
// set on the command line and one forwarded from the launcher's own
// environment (a secret stays off the command line). Open MPI's mpirun
// says it with -np, --map-by and -x; Intel MPI's Hydra with -n, -ppn and
// -genv, and it passes its whole environment on by default, so the
// forwarded name needs no option. Open MPI's ppn becomes per-host slots,
// and each flavor's binary has its own first name to look for on PATH
// (Debian's mpirun.openmpi alternative; FindLauncher resolves the real one).
func ExampleCommand() {
	for _, f := range []mpirun.Flavor{mpirun.OpenMPI, mpirun.IntelMPI} {
		argv, err := mpirun.Command(mpirun.Spec{
			Flavor:     f,
			NP:         8,
			PPN:        4,
			Hosts:      []mpirun.Host{{Name: "node1"}, {Name: "node2"}},
			Env:        map[string]string{"OMP_NUM_THREADS": "7"},
			ForwardEnv: []string{"BATCHKIT_TOKEN"},
			Program:    []string{"python3", "train.py", "--epochs", "2"},
		})
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s:\n  %s\n", f, strings.Join(argv, " ")) // one argument per word: run argv itself
	}
	// Output:
	// openmpi:
	//   mpirun.openmpi -np 8 --map-by ppr:4:node --host node1:4,node2:4 -x OMP_NUM_THREADS=7 -x BATCHKIT_TOKEN python3 train.py --epochs 2
	// intelmpi:
	//   mpirun -n 8 -ppn 4 -hosts node1,node2 -genv OMP_NUM_THREADS 7 -disable-auto-cleanup python3 train.py --epochs 2
}

// Hosts with slots of their own (3 ranks on node1, 1 on node2): Open MPI
// takes them on its command line, Intel MPI's -hosts cannot carry counts,
// so PlaceHosts hands back a machine file to write first, in Hydra's
// host:N form. DryRun shows the file's content as comments above the
// command, which it quotes for a POSIX shell.
func ExamplePlaceHosts() {
	hosts, err := mpirun.ParseHosts("node1:3,node2:1")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range []mpirun.Flavor{mpirun.OpenMPI, mpirun.IntelMPI} {
		spec := mpirun.Spec{Flavor: f, NP: 4, Program: []string{"./a.out", "--name", "my run"}}
		p, err := mpirun.PlaceHosts(spec, hosts, "", "")
		if err != nil {
			fmt.Println(err)
			continue
		}
		spec.Hosts, spec.HostfileSlots = p.Hosts, p.HostfileSlots
		if p.Generated != "" {
			spec.Hostfile = "/tmp/hosts" // where the caller writes p.Generated
		}
		out, err := mpirun.DryRun(spec, p.Generated)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s:\n%s", f, out)
	}
	// Output:
	// openmpi:
	// mpirun.openmpi -np 4 --host node1:3,node2:1 ./a.out --name 'my run'
	// intelmpi:
	// # /tmp/hosts (a temporary file when run):
	// #   node1:3
	// #   node2:1
	// mpirun -n 4 -machinefile /tmp/hosts -disable-auto-cleanup ./a.out --name 'my run'
}
