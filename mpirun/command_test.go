package mpirun

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

var prog = []string{"/bk", "exec", "--", "python3", "train.py"}

func withProg(args ...string) []string { return append(args, prog...) }

var twoNodes = []Host{{Name: "node1", Slots: 2}, {Name: "node2", Slots: 2}}

// Every flavor × {hosts on the command line, a hostfile, inside an
// allocation, srun as the launcher, environment, forwarded names}.
func TestCommand(t *testing.T) {
	env := map[string]string{"B": "x y", "A": "1"}
	// Forwarded: names only on the command line, values from the launcher's
	// environment. Hydra and srun pass that environment whole by default.
	tok := []string{"BATCHKIT_JOB_TOKEN"}
	tests := []struct {
		name string
		spec Spec
		want []string
	}{
		// Open MPI
		{"openmpi/hosts", Spec{Flavor: OpenMPI, NP: 4, PPN: 2, Hosts: []Host{{Name: "n1"}, {Name: "n2"}}},
			withProg("mpirun.openmpi", "-np", "4", "--map-by", "ppr:2:node", "--host", "n1:2,n2:2")},
		{"openmpi/hosts slots", Spec{Flavor: OpenMPI, NP: 3, Hosts: []Host{{Name: "n1", Slots: 2}, {Name: "n2"}}},
			withProg("mpirun.openmpi", "-np", "3", "--host", "n1:2,n2")},
		{"openmpi/hostfile", Spec{Flavor: OpenMPI, NP: 4, Hostfile: "/h", AllowRunAsRoot: true, Oversubscribe: true},
			withProg("mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", "4", "--hostfile", "/h")},
		{"openmpi/allocation", Spec{Flavor: OpenMPI, NP: 4, Hosts: twoNodes, InAllocation: true},
			withProg("mpirun.openmpi", "-np", "4", "--host", "node1:2,node2:2")},
		// salloc -N2 -n2 gives each node 1 slot; --ppn 2 must win, or
		// Open MPI finds "not enough slots" for ppr:2:node.
		{"openmpi/allocation ppn wins", Spec{Flavor: OpenMPI, NP: 4, PPN: 2, Hosts: []Host{{"node1", 1}, {"node2", 1}}, InAllocation: true},
			withProg("mpirun.openmpi", "-np", "4", "--map-by", "ppr:2:node", "--host", "node1:2,node2:2")},
		{"openmpi/srun", Spec{Flavor: OpenMPI, Launcher: ProgramSrun, NP: 4, PPN: 2, InAllocation: true},
			withProg("env", "SLURM_KILL_BAD_EXIT=1", "srun", "--mpi=pmix", "-n", "4", "--ntasks-per-node=2", "--export=ALL")},
		{"openmpi/env", Spec{Flavor: OpenMPI, NP: 2, Env: env, ExtraArgs: []string{"--bind-to", "none"}, Bootstrap: "ssh"},
			withProg("mpirun.openmpi", "--mca", "plm", "ssh", "-np", "2", "-x", "A=1", "-x", "B=x y", "--bind-to", "none")},
		{"openmpi/mpiexec", Spec{Flavor: OpenMPI, Launcher: ProgramMpiexec, NP: 1, Binary: "/opt/ompi/bin/mpiexec"},
			withProg("/opt/ompi/bin/mpiexec", "-np", "1")},
		{"openmpi/forward", Spec{Flavor: OpenMPI, NP: 2, Env: env, ForwardEnv: []string{"BATCHKIT_JOB_TOKEN", "SECRET"}, ExtraArgs: []string{"--bind-to", "none"}},
			withProg("mpirun.openmpi", "-np", "2", "-x", "A=1", "-x", "B=x y", "-x", "BATCHKIT_JOB_TOKEN", "-x", "SECRET", "--bind-to", "none")},
		{"openmpi/forward mpiexec", Spec{Flavor: OpenMPI, Launcher: ProgramMpiexec, NP: 1, ForwardEnv: tok},
			withProg("mpiexec.openmpi", "-np", "1", "-x", "BATCHKIT_JOB_TOKEN")},

		// MPICH (Hydra)
		{"mpich/hosts", Spec{Flavor: MPICH, NP: 4, PPN: 2, Hosts: []Host{{Name: "n1"}, {Name: "n2"}}},
			withProg("mpirun.mpich", "-n", "4", "-ppn", "2", "-hosts", "n1:2,n2:2")},
		{"mpich/hostfile", Spec{Flavor: MPICH, NP: 4, Hostfile: "/h", AllowRunAsRoot: true, Oversubscribe: true},
			withProg("mpirun.mpich", "-n", "4", "-f", "/h")},
		// MPICH's -f reads host:N counts.
		{"mpich/hostfile slots", Spec{Flavor: MPICH, NP: 5, Hostfile: "/h", HostfileSlots: true},
			withProg("mpirun.mpich", "-n", "5", "-f", "/h")},
		{"mpich/allocation", Spec{Flavor: MPICH, NP: 4, Hosts: twoNodes, InAllocation: true},
			withProg("mpirun.mpich", "-bootstrap", "slurm", "-n", "4", "-hosts", "node1:2,node2:2")},
		{"mpich/allocation ssh", Spec{Flavor: MPICH, NP: 4, InAllocation: true, Bootstrap: "ssh"},
			withProg("mpirun.mpich", "-bootstrap", "ssh", "-n", "4")},
		{"mpich/srun", Spec{Flavor: MPICH, Launcher: ProgramSrun, NP: 4, InAllocation: true},
			withProg("env", "SLURM_KILL_BAD_EXIT=1", "srun", "--mpi=pmi2", "-n", "4", "--export=ALL")},
		{"mpich/env", Spec{Flavor: MPICH, Launcher: ProgramMpiexec, NP: 2, Env: env},
			withProg("mpiexec.mpich", "-n", "2", "-genv", "A", "1", "-genv", "B", "x y")},
		{"mpich/forward", Spec{Flavor: MPICH, NP: 2, Env: env, ForwardEnv: tok},
			withProg("mpirun.mpich", "-n", "2", "-genv", "A", "1", "-genv", "B", "x y")},
		{"mpich/forward genvlist naming it", Spec{Flavor: MPICH, NP: 2, ForwardEnv: tok, ExtraArgs: []string{"-genvlist", "PATH,BATCHKIT_JOB_TOKEN"}},
			withProg("mpirun.mpich", "-n", "2", "-genvlist", "PATH,BATCHKIT_JOB_TOKEN")},
		{"mpich/forward genvall", Spec{Flavor: MPICH, NP: 2, ForwardEnv: tok, ExtraArgs: []string{"-genvall"}},
			withProg("mpirun.mpich", "-n", "2", "-genvall")},
		{"mpich/forward filter word as a value", Spec{Flavor: MPICH, NP: 1, ForwardEnv: tok, ExtraArgs: []string{"-genv", "MODE", "genvnone"}},
			withProg("mpirun.mpich", "-n", "1", "-genv", "MODE", "genvnone")},

		// Intel MPI
		{"intelmpi/hosts", Spec{Flavor: IntelMPI, NP: 4, PPN: 2, Hosts: []Host{{Name: "n1"}, {Name: "n2"}}},
			withProg("mpirun", "-n", "4", "-ppn", "2", "-hosts", "n1,n2", "-disable-auto-cleanup")},
		{"intelmpi/hostfile", Spec{Flavor: IntelMPI, NP: 4, Hostfile: "/h"},
			withProg("mpirun", "-n", "4", "-f", "/h", "-disable-auto-cleanup")},
		// Intel MPI's -f takes names only (counts ignored): host:N lines
		// go through -machinefile.
		{"intelmpi/hostfile slots", Spec{Flavor: IntelMPI, NP: 5, Hostfile: "/h", HostfileSlots: true},
			withProg("mpirun", "-n", "5", "-machinefile", "/h", "-disable-auto-cleanup")},
		{"intelmpi/hosts ppn wins over slots", Spec{Flavor: IntelMPI, NP: 4, PPN: 2, Hosts: []Host{{"n1", 1}, {"n2", 3}}},
			withProg("mpirun", "-n", "4", "-ppn", "2", "-hosts", "n1,n2", "-disable-auto-cleanup")},
		{"intelmpi/allocation", Spec{Flavor: IntelMPI, NP: 4, Hostfile: "/h", InAllocation: true},
			withProg("mpirun", "-bootstrap", "slurm", "-n", "4", "-f", "/h", "-disable-auto-cleanup")},
		{"intelmpi/srun", Spec{Flavor: IntelMPI, Launcher: ProgramSrun, NP: 4, SrunMPI: "pmi2", Hosts: twoNodes},
			withProg("env", "SLURM_KILL_BAD_EXIT=1", "srun", "--mpi=pmi2", "-n", "4", "--nodelist=node1,node2", "--export=ALL")},
		{"intelmpi/env", Spec{Flavor: IntelMPI, Launcher: ProgramMpiexec, NP: 2, Env: env},
			withProg("mpiexec.hydra", "-n", "2", "-genv", "A", "1", "-genv", "B", "x y", "-disable-auto-cleanup")},
		{"intelmpi/forward", Spec{Flavor: IntelMPI, NP: 2, Hostfile: "/h", ForwardEnv: tok, ExtraArgs: []string{"--genvlist=BATCHKIT_JOB_TOKEN,I_MPI_DEBUG"}},
			withProg("mpirun", "-n", "2", "-f", "/h", "-disable-auto-cleanup", "--genvlist=BATCHKIT_JOB_TOKEN,I_MPI_DEBUG")},

		// MVAPICH2
		{"mvapich/hostfile", Spec{Flavor: MVAPICH, NP: 4, PPN: 2, Hostfile: "/h"},
			withProg("mpirun_rsh", "-np", "4", "-ppn", "2", "-hostfile", "/h")},
		{"mvapich/allocation", Spec{Flavor: MVAPICH, NP: 4, Hostfile: "/h", InAllocation: true},
			withProg("mpirun_rsh", "-np", "4", "-hostfile", "/h")},
		{"mvapich/srun", Spec{Flavor: MVAPICH, Launcher: ProgramSrun, NP: 4},
			withProg("env", "SLURM_KILL_BAD_EXIT=1", "srun", "--mpi=pmi2", "-n", "4", "--export=ALL")},
		{"mvapich/env", Spec{Flavor: MVAPICH, NP: 2, Env: env, ExtraArgs: []string{"-export"}, Bootstrap: "ssh"},
			withProg("mpirun_rsh", "-launcher", "ssh", "-np", "2", "-export", "A=1", "B=x y")},
		{"mvapich/mpiexec hosts", Spec{Flavor: MVAPICH, Launcher: ProgramMpiexec, NP: 4, Hosts: twoNodes, InAllocation: true},
			withProg("mpiexec.hydra", "-bootstrap", "slurm", "-n", "4", "-hosts", "node1:2,node2:2")},
		// mpirun_rsh cannot forward (see TestCommandErrors); its Hydra
		// mpiexec can.
		{"mvapich/forward mpiexec", Spec{Flavor: MVAPICH, Launcher: ProgramMpiexec, NP: 2, Env: env, ForwardEnv: tok},
			withProg("mpiexec.hydra", "-n", "2", "-genv", "A", "1", "-genv", "B", "x y")},

		// srun without a flavor: Slurm's MpiDefault; env on srun itself.
		{"srun/env", Spec{Launcher: ProgramSrun, NP: 2, Env: env},
			withProg("env", "A=1", "B=x y", "SLURM_KILL_BAD_EXIT=1", "srun", "-n", "2", "--export=ALL")},
		// SLURM_KILL_BAD_EXIT=1 is srun's --kill-on-bad-exit=1; --env's
		// value wins.
		{"srun/keep going", Spec{Launcher: ProgramSrun, NP: 2, Env: map[string]string{"SLURM_KILL_BAD_EXIT": "0"}},
			withProg("env", "SLURM_KILL_BAD_EXIT=0", "srun", "-n", "2", "--export=ALL")},
		{"srun/plugin", Spec{Launcher: ProgramSrun, NP: 2, SrunMPI: "pmix_v4", Binary: "/usr/bin/srun"},
			withProg("env", "SLURM_KILL_BAD_EXIT=1", "/usr/bin/srun", "--mpi=pmix_v4", "-n", "2", "--export=ALL")},
		// srun's --export=ALL carries forwarded names; a later --export
		// must keep them.
		{"srun/forward", Spec{Launcher: ProgramSrun, NP: 2, Env: env, ForwardEnv: tok},
			withProg("env", "A=1", "B=x y", "SLURM_KILL_BAD_EXIT=1", "srun", "-n", "2", "--export=ALL")},
		{"srun/forward export all", Spec{Flavor: OpenMPI, Launcher: ProgramSrun, NP: 2, ForwardEnv: tok, ExtraArgs: []string{"--export=ALL,X=1"}},
			withProg("env", "SLURM_KILL_BAD_EXIT=1", "srun", "--mpi=pmix", "-n", "2", "--export=ALL", "--export=ALL,X=1")},
		{"srun/forward export list", Spec{Launcher: ProgramSrun, NP: 2, ForwardEnv: tok, ExtraArgs: []string{"--export", "PATH,BATCHKIT_JOB_TOKEN"}},
			withProg("env", "SLURM_KILL_BAD_EXIT=1", "srun", "-n", "2", "--export=ALL", "--export", "PATH,BATCHKIT_JOB_TOKEN")},
	}
	seen := map[Flavor]map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			spec.Program = prog
			got, err := Command(spec)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Command (-want +got):\n%s", diff)
			}
		})
		f, kind, _ := strings.Cut(tt.name, "/")
		if seen[Flavor(f)] == nil {
			seen[Flavor(f)] = map[string]bool{}
		}
		seen[Flavor(f)][strings.Fields(kind)[0]] = true
	}
	for _, f := range Flavors {
		for _, kind := range []string{"hostfile", "allocation", "srun", "env", "forward"} {
			if !seen[f][kind] {
				t.Errorf("no %s case for %s", kind, f)
			}
		}
	}
}

func TestCommandErrors(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"no ranks", Spec{Flavor: OpenMPI}, "number of ranks 0: must be at least 1"},
		{"negative ppn", Spec{Flavor: OpenMPI, NP: 1, PPN: -1}, "ranks per node -1"},
		{"no program", Spec{Flavor: OpenMPI, NP: 1, Program: []string{}}, "no program"},
		{"empty program", Spec{Flavor: OpenMPI, NP: 1, Program: []string{""}}, "no program"},
		{"hosts and hostfile", Spec{Flavor: OpenMPI, NP: 1, Hosts: twoNodes, Hostfile: "/h"}, "exclusive"},
		{"empty host", Spec{Flavor: OpenMPI, NP: 1, Hosts: []Host{{Name: ""}}}, "empty host name"},
		{"dash host", Spec{Flavor: MPICH, NP: 1, Hosts: []Host{{Name: "-f"}}}, `host name "-f" starts with '-'`},
		{"space host", Spec{Flavor: MPICH, NP: 1, Hosts: []Host{{Name: "a b"}}}, "invalid character"},
		{"negative slots", Spec{Flavor: MPICH, NP: 1, Hosts: []Host{{Name: "a", Slots: -1}}}, "slots -1"},
		{"env name digit", Spec{Flavor: OpenMPI, NP: 1, Env: map[string]string{"1A": "x"}}, `environment variable name "1A"`},
		{"env name equals", Spec{Flavor: MPICH, NP: 1, Env: map[string]string{"A=B": "x"}}, `environment variable name "A=B"`},
		{"env name empty", Spec{Flavor: MPICH, NP: 1, Env: map[string]string{"": "x"}}, `environment variable name ""`},
		{"env NUL", Spec{Flavor: MPICH, NP: 1, Env: map[string]string{"A": "x\x00"}}, "NUL"},
		{"arg NUL", Spec{Flavor: MPICH, NP: 1, Program: []string{"a", "b\x00"}}, "NUL"},
		{"unknown flavor", Spec{Flavor: "lam", NP: 1}, `unknown MPI flavor "lam"`},
		{"no flavor", Spec{NP: 1}, "no MPI flavor"},
		{"unknown launcher", Spec{Flavor: OpenMPI, Launcher: "aprun", NP: 1}, `unknown launcher "aprun"`},
		{"srun bad flavor", Spec{Flavor: "lam", Launcher: ProgramSrun, NP: 1}, `unknown MPI flavor "lam"`},
		{"srun bootstrap", Spec{Launcher: ProgramSrun, NP: 1, Bootstrap: "ssh"}, "srun has no bootstrap option"},
		{"srun hostfile", Spec{Launcher: ProgramSrun, NP: 1, Hostfile: "/h"}, "srun takes no hostfile"},
		{"mpirun srun plugin", Spec{Flavor: MPICH, NP: 1, SrunMPI: "pmi2"}, "needs launcher srun"},
		{"bootstrap word", Spec{Flavor: MPICH, NP: 1, Bootstrap: "ssh -x"}, `bootstrap "ssh -x": want a single word`},
		{"bootstrap dash", Spec{Flavor: MPICH, NP: 1, Bootstrap: "-x"}, "single word"},
		{"intel slots", Spec{Flavor: IntelMPI, NP: 1, Hosts: twoNodes}, "cannot take per-host slots on the command line"},
		{"colon argument", Spec{Flavor: OpenMPI, NP: 1, Program: []string{"/bk", "exec", "--", "prog", ":", "rm"}},
			`program argument 4 is ":", which Open MPI mpirun takes as the start of another program`},
		{"colon argument srun", Spec{Launcher: ProgramSrun, NP: 1, Program: []string{"/bk", ":"}}, `srun takes as the start`},
		{"colon argument wrapped", Spec{Flavor: MPICH, NP: 1, Program: []string{"/bk", "exec", "--", "prog", "a", ":"}, Wrapped: 3},
			`argument 2 of prog is ":", which Hydra mpiexec takes`},
		{"colon program wrapped", Spec{Flavor: MPICH, NP: 1, Program: []string{"/bk", "exec", "--", ":"}, Wrapped: 3},
			`the program is ":"`},
		{"mvapich hosts", Spec{Flavor: MVAPICH, NP: 1, Hosts: []Host{{Name: "a"}}}, "MVAPICH2 mpirun_rsh takes hosts only in a hostfile"},

		// ForwardEnv
		{"forward name digit", Spec{Flavor: OpenMPI, NP: 1, ForwardEnv: []string{"1A"}}, `forwarded environment variable name "1A"`},
		{"forward name empty", Spec{Flavor: MPICH, NP: 1, ForwardEnv: []string{""}}, `forwarded environment variable name ""`},
		{"forward name equals", Spec{Launcher: ProgramSrun, NP: 1, ForwardEnv: []string{"A=B"}}, `forwarded environment variable name "A=B"`},
		{"forward twice", Spec{Flavor: OpenMPI, NP: 1, ForwardEnv: []string{"T", "U", "T"}}, "environment variable T forwarded twice"},
		{"forward and env", Spec{Flavor: OpenMPI, NP: 1, Env: map[string]string{"T": "x"}, ForwardEnv: []string{"T"}},
			"environment variable T is both forwarded and set on the command line"},
		{"mvapich rsh forward", Spec{Flavor: MVAPICH, NP: 1, Hostfile: "/h", ForwardEnv: []string{"T", "U"}},
			"MVAPICH2 mpirun_rsh passes environment values only on command lines, which every user can read: cannot forward T,U; use the mpiexec or srun launcher"},
		{"hydra genvnone", Spec{Flavor: MPICH, NP: 1, ForwardEnv: []string{"T"}, ExtraArgs: []string{"-genvnone"}},
			"Hydra mpiexec option -genvnone passes no variable of the launcher's environment to the ranks, which need T"},
		{"hydra envnone dashes", Spec{Flavor: MVAPICH, Launcher: ProgramMpiexec, NP: 1, ForwardEnv: []string{"T"}, ExtraArgs: []string{"--envnone"}},
			"option --envnone passes no variable"},
		{"hydra genvlist without it", Spec{Flavor: MPICH, NP: 1, ForwardEnv: []string{"T"}, ExtraArgs: []string{"-prepend-rank", "-genvlist", "PATH,ALL"}},
			`Hydra mpiexec option -genvlist passes only the variables it lists to the ranks ("PATH,ALL"): add T to it`},
		{"hydra envlist equals", Spec{Flavor: IntelMPI, NP: 1, ForwardEnv: []string{"T", "U"}, ExtraArgs: []string{"--envlist=T"}},
			`Intel MPI mpiexec.hydra option --envlist=T passes only the variables it lists to the ranks ("T"): add U to it`},
		{"srun export none", Spec{Launcher: ProgramSrun, NP: 1, ForwardEnv: []string{"T"}, ExtraArgs: []string{"--export=NONE"}},
			`srun option --export=NONE passes only the variables it lists to the ranks ("NONE"): add T to it`},
		{"srun export list", Spec{Launcher: ProgramSrun, NP: 1, ForwardEnv: []string{"T"}, ExtraArgs: []string{"--export", "PATH"}},
			`srun option --export passes only the variables it lists to the ranks ("PATH"): add T to it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			if spec.Program == nil {
				spec.Program = prog
			}
			got, err := Command(spec)
			if err == nil {
				t.Fatalf("Command = %q, want an error containing %q", got, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line containing %q", err, tt.want)
			}
		})
	}
}

func TestValidEnvName(t *testing.T) {
	for name, want := range map[string]bool{
		"A": true, "_": true, "a_B9": true, "MASTER_ADDR": true,
		"": false, "9A": false, "A-B": false, "A B": false, "Ä": false, "A=": false,
	} {
		if got := ValidEnvName(name); got != want {
			t.Errorf("ValidEnvName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestCanForwardEnv(t *testing.T) {
	got := map[string]bool{}
	for _, f := range Flavors {
		for _, l := range Programs {
			got[string(f)+"/"+string(l)] = CanForwardEnv(Spec{Flavor: f, Launcher: l})
		}
	}
	got["srun"] = CanForwardEnv(Spec{Launcher: ProgramSrun})
	got["lam"] = CanForwardEnv(Spec{Flavor: "lam"})
	want := map[string]bool{
		"openmpi/mpirun": true, "openmpi/mpiexec": true, "openmpi/srun": true,
		"mpich/mpirun": true, "mpich/mpiexec": true, "mpich/srun": true,
		"intelmpi/mpirun": true, "intelmpi/mpiexec": true, "intelmpi/srun": true,
		"mvapich/mpirun": false, "mvapich/mpiexec": true, "mvapich/srun": true,
		"srun": true, "lam": false,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CanForwardEnv (-want +got):\n%s", diff)
	}
}

func TestNeedsHostfile(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want bool
	}{
		{"openmpi slots", Spec{Flavor: OpenMPI, Hosts: twoNodes}, false},
		{"mpich slots", Spec{Flavor: MPICH, Hosts: twoNodes}, false},
		{"intel slots", Spec{Flavor: IntelMPI, Hosts: twoNodes}, true},
		{"intel bare", Spec{Flavor: IntelMPI, Hosts: []Host{{Name: "a"}}, PPN: 2}, false},
		{"intel slots under ppn", Spec{Flavor: IntelMPI, Hosts: twoNodes, PPN: 2}, false},
		{"mvapich", Spec{Flavor: MVAPICH, Hosts: []Host{{Name: "a"}}}, true},
		{"mvapich mpiexec", Spec{Flavor: MVAPICH, Launcher: ProgramMpiexec, Hosts: twoNodes}, false},
		{"srun slots", Spec{Launcher: ProgramSrun, Hosts: twoNodes}, false},
		{"no hosts", Spec{Flavor: MVAPICH}, false},
	}
	for _, tt := range tests {
		if got := NeedsHostfile(tt.spec); got != tt.want {
			t.Errorf("%s: NeedsHostfile = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A profile's bootstrap through Slurm makes sense only in an allocation.
func TestBootstrapNeedsAllocation(t *testing.T) {
	got := map[string]bool{}
	for _, f := range Flavors {
		for _, l := range Programs {
			for _, b := range []string{"slurm", "srun", "ssh", ""} {
				if BootstrapNeedsAllocation(Spec{Flavor: f, Launcher: l}, b) {
					got[string(f)+"/"+string(l)+"/"+b] = true
				}
			}
		}
	}
	want := map[string]bool{
		"openmpi/mpirun/slurm": true, "openmpi/mpiexec/slurm": true,
		"mpich/mpirun/slurm": true, "mpich/mpiexec/slurm": true,
		"intelmpi/mpirun/slurm": true, "intelmpi/mpiexec/slurm": true,
		"mvapich/mpirun/srun": true, "mvapich/mpiexec/slurm": true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BootstrapNeedsAllocation (-want +got):\n%s", diff)
	}
}

// Only Intel MPI's Hydra, starting its proxies through srun (-bootstrap
// slurm, or nothing inside an allocation), has a batch script shield it
// from SIGUSR1: srun itself and Hydra over ssh do not need it.
func TestShieldUSR1(t *testing.T) {
	got := map[string]bool{}
	for _, f := range Flavors {
		for _, l := range Programs {
			for _, b := range []string{"slurm", "ssh", ""} {
				for _, alloc := range []bool{false, true} {
					if ShieldUSR1(Spec{Flavor: f, Launcher: l, Bootstrap: b, InAllocation: alloc}) {
						got[fmt.Sprintf("%s/%s/%s/%v", f, l, b, alloc)] = true
					}
				}
			}
		}
	}
	want := map[string]bool{
		"intelmpi/mpirun/slurm/false": true, "intelmpi/mpirun/slurm/true": true, "intelmpi/mpirun//true": true,
		"intelmpi/mpiexec/slurm/false": true, "intelmpi/mpiexec/slurm/true": true, "intelmpi/mpiexec//true": true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ShieldUSR1 (-want +got):\n%s", diff)
	}
}

// PlaceHosts then Command: the route each launcher's hosts take.
func TestPlaceHosts(t *testing.T) {
	ompiFile := "# Open MPI\nnode1 slots=2\nnode2 slots=2 max_slots=4\n"
	hydraFile := "node1:2\nnode2:2\n"
	oneSlot := []Host{{"node1", 1}, {"node2", 1}}
	tests := []struct {
		name      string
		spec      Spec
		hosts     []Host
		file      string
		text      string
		want      Placement
		wantError string
	}{
		{"none", Spec{Flavor: OpenMPI}, nil, "", "", Placement{}, ""},
		{"openmpi hosts", Spec{Flavor: OpenMPI}, twoNodes, "", "", Placement{Hosts: twoNodes}, ""},
		{"intel hosts with slots", Spec{Flavor: IntelMPI}, twoNodes, "", "",
			Placement{Generated: "node1:2\nnode2:2\n", HostfileSlots: true}, ""},
		{"intel hosts without slots", Spec{Flavor: IntelMPI, PPN: 2}, []Host{{Name: "a"}}, "", "",
			Placement{Hosts: []Host{{Name: "a"}}}, ""},
		{"intel hosts with slots under ppn", Spec{Flavor: IntelMPI, PPN: 2}, oneSlot, "", "",
			Placement{Hosts: oneSlot}, ""},
		{"mvapich hosts, ppn wins over slots", Spec{Flavor: MVAPICH, PPN: 3}, []Host{{Name: "a"}, {Name: "b", Slots: 1}}, "", "",
			Placement{Generated: "a:3\nb:3\n", HostfileSlots: true}, ""},
		{"mvapich bare hosts", Spec{Flavor: MVAPICH}, []Host{{Name: "a"}}, "", "", Placement{Generated: "a\n"}, ""},
		{"openmpi file passes", Spec{Flavor: OpenMPI}, twoNodes, "/h", ompiFile, Placement{Hostfile: "/h", HostfileSlots: true}, ""},
		{"openmpi file agreeing with ppn passes", Spec{Flavor: OpenMPI, PPN: 2}, twoNodes, "/h", ompiFile,
			Placement{Hostfile: "/h", HostfileSlots: true}, ""},
		{"openmpi file rewritten for ppn", Spec{Flavor: OpenMPI, PPN: 2}, oneSlot, "/h", "node1 slots=1\nnode2 slots=1\n",
			Placement{Generated: "node1 slots=2\nnode2 slots=2\n", HostfileSlots: true}, ""},
		{"openmpi file to hydra", Spec{Flavor: MPICH}, twoNodes, "/h", ompiFile, Placement{Generated: hydraFile, HostfileSlots: true}, ""},
		{"hydra file passes", Spec{Flavor: IntelMPI}, twoNodes, "/h", hydraFile, Placement{Hostfile: "/h", HostfileSlots: true}, ""},
		{"hydra file to openmpi", Spec{Flavor: OpenMPI}, twoNodes, "/h", hydraFile,
			Placement{Generated: "node1 slots=2\nnode2 slots=2\n", HostfileSlots: true}, ""},
		{"bare file passes everywhere", Spec{Flavor: MVAPICH}, []Host{{Name: "a"}}, "/h", "a\n", Placement{Hostfile: "/h"}, ""},
		{"srun file becomes nodelist", Spec{Launcher: ProgramSrun}, twoNodes, "/h", hydraFile, Placement{Hosts: twoNodes}, ""},
		{"bad file", Spec{Flavor: OpenMPI}, twoNodes, "/h", "a b\n", Placement{}, "hostfile line 1"},
		{"bad launcher", Spec{Flavor: OpenMPI, Launcher: "x"}, twoNodes, "", "", Placement{}, "unknown launcher"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PlaceHosts(tt.spec, tt.hosts, tt.file, tt.text)
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("error %v, want %q", err, tt.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PlaceHosts (-want +got):\n%s", diff)
			}
			// Whatever the placement, the launcher accepts it.
			spec := tt.spec
			spec.NP, spec.Program = 4, prog
			spec.Hosts, spec.Hostfile, spec.HostfileSlots = got.Hosts, got.Hostfile, got.HostfileSlots
			if got.Generated != "" {
				spec.Hostfile = "/tmp/generated"
			}
			if _, err := Command(spec); err != nil {
				t.Errorf("Command after PlaceHosts: %v", err)
			}
		})
	}
}

func TestDefaultNP(t *testing.T) {
	for _, tt := range []struct {
		hosts []Host
		ppn   int
		want  int
	}{
		{nil, 2, 0},
		{twoNodes, 0, 4},
		{twoNodes, 1, 2},
		{[]Host{{Name: "a"}, {Name: "b"}}, 3, 6},
		{[]Host{{Name: "a", Slots: 2}, {Name: "b"}}, 0, 0},
	} {
		if got := DefaultNP(tt.hosts, tt.ppn); got != tt.want {
			t.Errorf("DefaultNP(%v, %d) = %d, want %d", tt.hosts, tt.ppn, got, tt.want)
		}
	}
}

func TestBinaries(t *testing.T) {
	got := map[string][]string{}
	for _, f := range Flavors {
		for _, l := range []Program{ProgramMpirun, ProgramMpiexec} {
			got[string(f)+"/"+string(l)] = Binaries(f, l)
		}
	}
	got["srun"] = Binaries("", ProgramSrun)
	want := map[string][]string{
		"openmpi/mpirun":   {"mpirun.openmpi", "mpirun"},
		"openmpi/mpiexec":  {"mpiexec.openmpi", "mpiexec"},
		"mpich/mpirun":     {"mpirun.mpich", "mpiexec.mpich", "mpiexec.hydra", "mpirun"},
		"mpich/mpiexec":    {"mpiexec.mpich", "mpiexec.hydra", "mpiexec"},
		"intelmpi/mpirun":  {"mpirun", "mpiexec.hydra"},
		"intelmpi/mpiexec": {"mpiexec.hydra", "mpiexec"},
		"mvapich/mpirun":   {"mpirun_rsh"},
		"mvapich/mpiexec":  {"mpiexec.hydra", "mpiexec"},
		"srun":             {"srun"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Binaries (-want +got):\n%s", diff)
	}
	if Binaries("lam", ProgramMpirun) != nil {
		t.Error("Binaries of an unknown flavor should be nil")
	}
}

// The --dry-run output of each flavor on two nodes with awkward values and
// the job token forwarded, as batchkit mpirun prints it: golden files in
// testdata (go test -update). mpirun_rsh cannot forward (TestCommandErrors).
func TestDryRunGolden(t *testing.T) {
	env := map[string]string{
		"MASTER_ADDR": "node1", "MASTER_PORT": "15042",
		"NCCL_DEBUG": "INFO", "NOTE": "it's $HOME, \"quoted\" & a,b",
	}
	program := []string{"/opt/batchkit/bin/batchkit", "exec", "--", "python3", "-c", "import sys; print(sys.argv)", "--lr=1e-3", "a b", ""}
	tok := []string{"BATCHKIT_JOB_TOKEN"}
	// 4 ranks, 2 per node, unless a case gives NP (then no ranks per node:
	// the hosts' own slots place them).
	uneven := []Host{{Name: "node1", Slots: 2}, {Name: "node2", Slots: 3}}
	specs := map[string]struct {
		spec  Spec
		hosts []Host
	}{
		"openmpi":         {Spec{Flavor: OpenMPI, AllowRunAsRoot: true, Oversubscribe: true, ExtraArgs: []string{"--bind-to", "none"}, ForwardEnv: tok}, twoNodes},
		"mpich":           {Spec{Flavor: MPICH, InAllocation: true, ForwardEnv: tok}, twoNodes},
		"intelmpi":        {Spec{Flavor: IntelMPI, InAllocation: true, ExtraArgs: []string{"-genv", "I_MPI_DEBUG", "5"}, ForwardEnv: tok}, twoNodes},
		"intelmpi-slots":  {Spec{Flavor: IntelMPI, NP: 5, InAllocation: true, ForwardEnv: tok}, uneven},
		"mvapich":         {Spec{Flavor: MVAPICH}, twoNodes},
		"mvapich-mpiexec": {Spec{Flavor: MVAPICH, Launcher: ProgramMpiexec, InAllocation: true, ForwardEnv: tok}, twoNodes},
		"srun":            {Spec{Flavor: MPICH, Launcher: ProgramSrun, InAllocation: true, ForwardEnv: tok}, twoNodes},
	}
	for name, c := range specs {
		t.Run(name, func(t *testing.T) {
			spec := c.spec
			if spec.NP == 0 {
				spec.NP, spec.PPN = 4, 2
			}
			spec.Env, spec.Program = env, program
			place, err := PlaceHosts(spec, c.hosts, "", "")
			if err != nil {
				t.Fatal(err)
			}
			spec.Hosts, spec.Hostfile, spec.HostfileSlots = place.Hosts, place.Hostfile, place.HostfileSlots
			if place.Generated != "" {
				spec.Hostfile = "batchkit.hostfile"
			}
			got, err := DryRun(spec, place.Generated)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", path, diff)
			}
		})
	}
}

// The dry-run line is POSIX single-quoted (shquote): pasted into sh, bash
// or zsh it runs exactly the command. (Command refuses a NUL byte first.)
func TestDryRunQuotes(t *testing.T) {
	spec := Spec{Flavor: OpenMPI, NP: 1, Program: []string{"train", "it's", "a\nb", "$(x)", "=ls", ""}}
	got, err := DryRun(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := " train 'it'\\''s' 'a\nb' '$(x)' '=ls' ''\n"; !strings.HasSuffix(got, want) {
		t.Errorf("DryRun = %q, want it to end %q", got, want)
	}
}
