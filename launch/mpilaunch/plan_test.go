package mpilaunch

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/mpirun"
)

// machine is a fake machine: onPath are the binaries on PATH with their
// --version banners, env the environment, files the readable files.
func machine(onPath, env, files map[string]string) Machine {
	return Machine{
		Getenv: func(k string) string { return env[k] },
		Probe: mpirun.Probe{
			LookPath: func(name string) (string, error) {
				if _, ok := onPath[name]; ok {
					return "/usr/bin/" + name, nil
				}
				return "", errors.New("not found")
			},
			Version: func(path string) (string, error) {
				return onPath[strings.TrimPrefix(path, "/usr/bin/")], nil
			},
		},
		ReadFile: func(name string) ([]byte, error) {
			if f, ok := files[name]; ok {
				return []byte(f), nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		},
		Self:     "/bk",
		FreePort: func() (int, error) { return 40000, nil },
		Resolve: func(host string) error {
			if strings.HasSuffix(host, ".invalid") {
				return errors.New("no such host")
			}
			return nil
		},
	}
}

var (
	openMPI  = map[string]string{"mpirun.openmpi": "mpirun (Open MPI) 4.1.2"}
	hydra    = map[string]string{"mpiexec.hydra": "HYDRA build details:", "srun": "slurm 23.02"}
	inJob    = map[string]string{"SLURM_JOB_ID": "15001", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)"}
	prog     = []string{"/bk", "exec", "--", "python3", "train.py"}
	token    = []string{"BATCHKIT_JOB_TOKEN"}
	twoHosts = []mpirun.Host{{Name: "n1", Slots: 2}, {Name: "n2", Slots: 2}}
)

func TestNewPlan(t *testing.T) {
	tests := []struct {
		name    string
		o       Options
		m       Machine
		want    Plan
		wantErr string // a launch.ErrInvalid error's text
	}{
		{
			name: "open mpi on this machine: a free port on 127.0.0.1",
			o:    Options{NP: 2, NPSet: true},
			m:    machine(openMPI, nil, nil),
			want: Plan{Found: true, Spec: mpirun.Spec{
				Flavor: mpirun.OpenMPI, Launcher: mpirun.ProgramMpirun, Binary: "mpirun.openmpi", NP: 2,
				Env:        map[string]string{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "40000"},
				ForwardEnv: token, Program: prog, Wrapped: 3,
			}},
		},
		{
			name: "hydra in an allocation: the job's hosts and port (15000 + id mod 15000), the node count, slurm bootstrap from the profile",
			o:    Options{Flavor: "mpich", Launcher: mpirun.ProgramMpiexec, Bootstrap: "slurm", SrunMPI: "pmi2"},
			m:    machine(hydra, inJob, nil),
			want: Plan{Found: true, Spec: mpirun.Spec{
				Flavor: mpirun.MPICH, Launcher: mpirun.ProgramMpiexec, Binary: "mpiexec.hydra", NP: 4,
				Hosts: twoHosts, Bootstrap: "slurm", InAllocation: true,
				Env:        map[string]string{"MASTER_ADDR": "n1", "MASTER_PORT": "15001", "BATCHKIT_MPIRUN_NUM_NODES": "2"},
				ForwardEnv: token, Program: prog, Wrapped: 3,
			}},
		},
		{
			name: "a profile's slurm bootstrap outside an allocation is dropped",
			o:    Options{Flavor: "mpich", Launcher: mpirun.ProgramMpiexec, Bootstrap: "slurm", NP: 1, NPSet: true},
			m:    machine(hydra, nil, nil),
			want: Plan{Found: true, Spec: mpirun.Spec{
				Flavor: mpirun.MPICH, Launcher: mpirun.ProgramMpiexec, Binary: "mpiexec.hydra", NP: 1,
				Env:        map[string]string{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "40000"},
				ForwardEnv: token, Program: prog, Wrapped: 3,
			}},
		},
		{
			name: "srun in an allocation: the job's port, srun's plugin kept, the profile's bootstrap dropped",
			o:    Options{Flavor: "mpich", Launcher: mpirun.ProgramSrun, Bootstrap: "slurm", SrunMPI: "pmi2", PPN: 2, NP: 4, NPSet: true},
			m:    machine(hydra, inJob, nil),
			want: Plan{Found: true, Spec: mpirun.Spec{
				Flavor: mpirun.MPICH, Launcher: mpirun.ProgramSrun, Binary: "srun", NP: 4, PPN: 2,
				Hosts: twoHosts, SrunMPI: "pmi2", InAllocation: true,
				Env:        map[string]string{"MASTER_ADDR": "n1", "MASTER_PORT": "15001"},
				ForwardEnv: token, Program: prog, Wrapped: 3,
			}},
		},
		{
			name: "a user's hostfile passed through; --env over the profile's, the user's over the profile's",
			o: Options{Hostfile: "hosts", Env: []string{"A=flag"}, ProfileEnv: map[string]string{"A": "site", "B": "site", "C": "site"},
				Lookup: func(k string) (string, bool) { return "mine", k == "B" }, MPIArgs: []string{"--tag-output"}, DefaultArgs: []string{"--bind-to", "none"}},
			m: machine(openMPI, nil, map[string]string{"hosts": "n1 slots=2\nn2 slots=2\n"}),
			want: Plan{Found: true, Spec: mpirun.Spec{
				Flavor: mpirun.OpenMPI, Launcher: mpirun.ProgramMpirun, Binary: "mpirun.openmpi", NP: 4,
				Hostfile: "hosts", HostfileSlots: true, ExtraArgs: []string{"--bind-to", "none", "--tag-output"},
				Env:        map[string]string{"A": "flag", "B": "mine", "C": "site", "MASTER_ADDR": "n1", "MASTER_PORT": "40000"},
				ForwardEnv: token, Program: prog, Wrapped: 3,
			}},
		},
		{
			name: "mpirun_rsh: a generated hostfile, no job token (it cannot forward one)",
			o:    Options{Flavor: "mvapich", Hosts: "n1:2,n2:2", MasterPort: 1234},
			m:    machine(map[string]string{"mpirun_rsh": ""}, nil, nil),
			want: Plan{Found: true, Hostfile: "n1:2\nn2:2\n", Spec: mpirun.Spec{
				Flavor: mpirun.MVAPICH, Launcher: mpirun.ProgramMpirun, Binary: "mpirun_rsh", NP: 4,
				Hostfile: DryRunHostfile, HostfileSlots: true,
				Env:     map[string]string{"MASTER_ADDR": "n1", "MASTER_PORT": "1234", "BATCHKIT_MPIRUN_NUM_NODES": "2"},
				Program: prog, Wrapped: 3,
			}},
		},
		{
			name: "launcher not on PATH: planned under its usual name, not found",
			o:    Options{Flavor: "openmpi", NP: 1, NPSet: true},
			m:    machine(nil, nil, nil),
			want: Plan{Spec: mpirun.Spec{
				Flavor: mpirun.OpenMPI, Launcher: mpirun.ProgramMpirun, Binary: "mpirun.openmpi", NP: 1,
				Env:        map[string]string{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "40000"},
				ForwardEnv: token, Program: prog, Wrapped: 3,
			}},
		},
		{
			name: "--no-fail-fast under hydra: BATCHKIT_FAIL_FAST=0 on every rank, by -genv",
			o:    Options{Flavor: "mpich", Launcher: mpirun.ProgramMpiexec, NP: 3, NPSet: true, FailFast: "0"},
			m:    machine(hydra, nil, nil),
			want: Plan{Found: true, Spec: mpirun.Spec{
				Flavor: mpirun.MPICH, Launcher: mpirun.ProgramMpiexec, Binary: "mpiexec.hydra", NP: 3,
				Env:        map[string]string{"BATCHKIT_FAIL_FAST": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "40000"},
				ForwardEnv: token, Program: prog, Wrapped: 3,
			}},
		},
		{
			name: "--fail-fast under open mpi: BATCHKIT_FAIL_FAST=1, over a profile's value",
			o:    Options{NP: 2, NPSet: true, FailFast: "1", ProfileEnv: map[string]string{"BATCHKIT_FAIL_FAST": "0"}},
			m:    machine(openMPI, nil, nil),
			want: Plan{Found: true, Spec: mpirun.Spec{
				Flavor: mpirun.OpenMPI, Launcher: mpirun.ProgramMpirun, Binary: "mpirun.openmpi", NP: 2,
				Env:        map[string]string{"BATCHKIT_FAIL_FAST": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "40000"},
				ForwardEnv: token, Program: prog, Wrapped: 3,
			}},
		},
		{
			name: "--no-fail-fast with srun: on srun's environment (mpirun.Command adds SLURM_KILL_BAD_EXIT=1)",
			o:    Options{Flavor: "mpich", Launcher: mpirun.ProgramSrun, NP: 4, NPSet: true, FailFast: "0"},
			m:    machine(hydra, inJob, nil),
			want: Plan{Found: true, Spec: mpirun.Spec{
				Flavor: mpirun.MPICH, Launcher: mpirun.ProgramSrun, Binary: "srun", NP: 4,
				Hosts: twoHosts, InAllocation: true,
				Env:        map[string]string{"BATCHKIT_FAIL_FAST": "0", "MASTER_ADDR": "n1", "MASTER_PORT": "15001"},
				ForwardEnv: token, Program: prog, Wrapped: 3,
			}},
		},
		{name: "a fail-fast value that is not 0 or 1", o: Options{NP: 1, NPSet: true, FailFast: "yes"}, m: machine(openMPI, nil, nil),
			wantErr: `BATCHKIT_FAIL_FAST="yes": want 0 or 1`},
		{name: "unknown launcher", o: Options{Launcher: "aprun"}, m: machine(openMPI, nil, nil),
			wantErr: `invalid --launcher "aprun": want mpirun, mpiexec, srun`},
		{name: "unknown flavor", o: Options{Flavor: "lam"}, m: machine(openMPI, nil, nil),
			wantErr: `unknown MPI flavor "lam": want one of openmpi, mpich, intelmpi, mvapich`},
		{name: "no rank count", o: Options{}, m: machine(openMPI, nil, nil),
			wantErr: "how many ranks? pass -n N (or --ppn with hosts, or hosts with slots)"},
		{name: "bad hosts", o: Options{Hosts: "a;b"}, m: machine(openMPI, nil, nil),
			wantErr: `invalid --hosts: host name "a;b": invalid character ';'`},
		{name: "missing hostfile", o: Options{Hostfile: "nope"}, m: machine(openMPI, nil, nil),
			wantErr: "--hostfile nope: file does not exist"},
		{name: "bad --env", o: Options{NP: 1, NPSet: true, Env: []string{"RANK=5"}}, m: machine(openMPI, nil, nil),
			wantErr: `invalid --env "RANK=5": batchkit exec sets RANK on every rank (it differs from rank to rank)`},
		{name: "allocation's task counts disagree", o: Options{},
			m:       machine(openMPI, map[string]string{"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2"}, nil),
			wantErr: `SLURM_TASKS_PER_NODE="2" lists 1 nodes but SLURM_JOB_NODELIST has 2`},
		{name: "more ranks than --ppn places on the hosts", o: Options{Flavor: "mpich", Hosts: "a,b", PPN: 2, NP: 5, NPSet: true},
			m: machine(hydra, nil, nil), wantErr: "5 ranks at 2 per host need 3 hosts, but --hosts has 2: add hosts, raise --ppn, lower -n or pass --oversubscribe"},
		{name: "more ranks than the hosts' slots", o: Options{Flavor: "mpich", Hosts: "a:2,b:1", NP: 4, NPSet: true},
			m: machine(hydra, nil, nil), wantErr: "4 ranks need 4 slots, but --hosts has 3: add hosts or slots, lower -n or pass --oversubscribe"},
		{name: "more ranks than a hostfile's slots", o: Options{Hostfile: "hosts", NP: 5, NPSet: true},
			m:       machine(openMPI, nil, map[string]string{"hosts": "n1 slots=2\nn2 slots=2\n"}),
			wantErr: "5 ranks need 5 slots, but hosts has 4: add hosts or slots, lower -n or pass --oversubscribe"},
		{name: "a --hosts name that does not resolve, over ssh", o: Options{Flavor: "mpich", Hosts: "a,b.invalid", NP: 2, NPSet: true},
			m: machine(hydra, nil, nil), wantErr: `host "b.invalid" (--hosts) does not resolve: no such host; the launcher reaches it by ssh (a name only ssh knows, a Host alias: pass --no-host-check)`},
		{name: "a hostfile name that does not resolve, over ssh", o: Options{Hostfile: "hosts", NP: 2, NPSet: true},
			m:       machine(openMPI, nil, map[string]string{"hosts": "x.invalid slots=2\n"}),
			wantErr: `host "x.invalid" (--hostfile hosts) does not resolve: no such host; the launcher reaches it by ssh (a name only ssh knows, a Host alias: pass --no-host-check)`},
		{name: "srun plugin given with mpiexec", o: Options{Flavor: "mpich", Launcher: mpirun.ProgramMpiexec, NP: 1, NPSet: true, SrunMPI: "pmi2", SrunMPISet: true},
			m: machine(hydra, nil, nil), wantErr: `an srun MPI plugin ("pmi2") needs launcher srun, not Hydra mpiexec`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Program = []string{"python3", "train.py"}
			if tt.o.Lookup == nil {
				tt.o.Lookup = func(string) (string, bool) { return "", false }
			}
			got, err := NewPlan(tt.o, tt.m)
			if tt.wantErr != "" {
				if !errors.Is(err, launch.ErrInvalid) || err.Error() != tt.wantErr {
					t.Fatalf("err = %v (invalid input: %v), want %q", err, errors.Is(err, launch.ErrInvalid), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// More ranks than the user's hosts have room for is refused unless
// oversubscribing was asked for; where the room is unknown or the hosts
// are the allocation's, the launcher decides.
func TestCheckRoom(t *testing.T) {
	ab, abSlots := []mpirun.Host{{Name: "a"}, {Name: "b"}}, []mpirun.Host{{Name: "a", Slots: 2}, {Name: "b", Slots: 2}}
	tests := []struct {
		name  string
		o     Options
		hosts []mpirun.Host
		np    int
		want  string // "": accepted
	}{
		{"ppn fills the hosts", Options{Hosts: "a,b", PPN: 2}, ab, 4, ""},
		{"ppn short of a host", Options{Hosts: "a,b", PPN: 2}, ab, 5,
			"5 ranks at 2 per host need 3 hosts, but --hosts has 2: add hosts, raise --ppn, lower -n or pass --oversubscribe"},
		{"ppn short, oversubscribe asked for", Options{Hosts: "a,b", PPN: 2, Oversubscribe: true}, ab, 5, ""},
		{"ppn wins over slots", Options{Hosts: "a:2,b:2", PPN: 3}, abSlots, 6, ""},
		{"slots fill the hosts", Options{Hostfile: "h"}, abSlots, 4, ""},
		{"slots short", Options{Hostfile: "h"}, abSlots, 5,
			"5 ranks need 5 slots, but h has 4: add hosts or slots, lower -n or pass --oversubscribe"},
		{"slots short, oversubscribe asked for", Options{Hostfile: "h", Oversubscribe: true}, abSlots, 5, ""},
		{"no slots, no ppn: the launcher decides", Options{Hosts: "a,b"}, ab, 5, ""},
		{"the allocation's task counts are no limit", Options{}, abSlots, 8, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := checkRoom(tt.o, tt.hosts, tt.np); err != nil {
				got = err.Error()
				if !errors.Is(err, launch.ErrInvalid) {
					t.Errorf("%v: not launch.ErrInvalid", err)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// Names are looked up only when the launcher will ssh to them: hosts the
// user named, outside an allocation, no scheduler bootstrap, no srun.
func TestCheckResolve(t *testing.T) {
	hosts := []mpirun.Host{{Name: "a"}, {Name: "b.invalid"}, {Name: "a"}}
	var (
		mu    sync.Mutex
		asked []string
	)
	resolve := func(h string) error { // called concurrently
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, h)
		if strings.HasSuffix(h, ".invalid") {
			return errors.New("no such host")
		}
		return nil
	}
	ssh := mpirun.Spec{Launcher: mpirun.ProgramMpirun}
	for _, tc := range []struct {
		name  string
		o     Options
		spec  mpirun.Spec
		asked []string
		err   string
	}{
		{"over ssh", Options{Hosts: "a,b.invalid,a"}, ssh, []string{"a", "b.invalid"}, `host "b.invalid" (--hosts) does not resolve`},
		{"bootstrap ssh", Options{Hosts: "x"}, mpirun.Spec{Launcher: mpirun.ProgramMpirun, Bootstrap: "ssh"}, []string{"a", "b.invalid"}, "does not resolve"},
		{"--no-host-check", Options{Hosts: "x", NoHostCheck: true}, ssh, nil, ""},
		{"no hosts named: the allocation's or this one", Options{}, ssh, nil, ""},
		{"in an allocation", Options{Hosts: "x"}, mpirun.Spec{Launcher: mpirun.ProgramMpirun, InAllocation: true}, nil, ""},
		{"bootstrap slurm", Options{Hosts: "x"}, mpirun.Spec{Launcher: mpirun.ProgramMpirun, Bootstrap: "slurm"}, nil, ""},
		{"srun", Options{Hosts: "x"}, mpirun.Spec{Launcher: mpirun.ProgramSrun}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			err := checkResolve(tc.o, tc.spec, hosts, resolve)
			slices.Sort(asked)
			if diff := cmp.Diff(tc.asked, asked); diff != "" {
				t.Errorf("hosts looked up (-want +got):\n%s", diff)
			}
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("err = %v, want one containing %q", err, tc.err)
			}
		})
	}
}
