package sbatch

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/internal/shquote"
	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/profile"
	"github.com/batchkit/batchkit/slurm"
	"github.com/batchkit/batchkit/templates"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// render builds and renders the sbatch script for a shipped profile with
// flag overrides applied the way the CLI does.
func render(t *testing.T, name string, overrides map[string]string, job slurm.JobOptions) string {
	t.Helper()
	loader := &profile.Loader{Embedded: profile.NewLoader(func(string) string { return "" }).Embedded}
	r, err := loader.Resolve(name)
	if err != nil {
		t.Fatalf("profile %s: %v", name, err)
	}
	for k, v := range overrides {
		if err := r.Set(k, v, profile.CommandLine); err != nil {
			t.Fatalf("set %s=%s: %v", k, v, err)
		}
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	set, err := templates.Load("")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(Request{ProfileName: name, Profile: r.Profile, Job: job, Templates: set,
		Program: []string{"python3", "train.py", "--data", "my data/$(x)"}, Batchkit: "/usr/bin/batchkit"})
	if err != nil {
		t.Fatal(err)
	}
	text := p.Text
	return text
}

// Golden batch scripts for every shipped profile × flavor × launcher.
func TestSbatchGolden(t *testing.T) {
	job := slurm.JobOptions{JobName: "train", Nodes: "2", NTasksPerNode: 4, Time: "1:00:00", Output: "%x-%j.out"}
	type tc struct {
		name, profile string
		over          map[string]string
		requeue       bool
	}
	var cases []tc
	for _, p := range []string{"local", "generic-openmpi", "intel-oneccl", "mpich"} {
		cases = append(cases, tc{name: p, profile: p})
	}
	for _, f := range mpirun.Flavors {
		for _, l := range []string{"mpirun", "srun"} {
			cases = append(cases, tc{name: "local-" + string(f) + "-" + l, profile: "local", over: map[string]string{"mpi.flavor": string(f), "mpi.launcher": l}})
		}
	}
	// --requeue: the script requeues itself after an exit 75, under either launcher.
	for _, l := range []string{"mpirun", "srun"} {
		cases = append(cases, tc{name: "local-openmpi-" + l + "-requeue", profile: "local", over: map[string]string{"mpi.launcher": l}, requeue: true})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			job := job
			job.Requeue = c.requeue
			got := render(t, c.profile, c.over, job)
			cmd := exec.Command("bash", "-n")
			cmd.Stdin = strings.NewReader(got)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("bash -n: %v: %s\n%s", err, stderr.String(), got)
			}
			path := filepath.Join("testdata", "sbatch-"+c.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", path, diff)
			}
		})
	}
}

func TestSbatchLaunchRanks(t *testing.T) {
	for _, tt := range []struct {
		job  slurm.JobOptions
		np   string
		fail bool
	}{
		{slurm.JobOptions{NTasks: 6}, "6", false},
		{slurm.JobOptions{Nodes: "3", NTasksPerNode: 2}, "6", false},
		{slurm.JobOptions{Nodes: "3"}, "3", false},
		{slurm.JobOptions{}, "1", false},
		{slurm.JobOptions{Nodes: "2-4"}, "", true},
	} {
		argv, err := LaunchLine(profile.MPI{Flavor: mpirun.MPICH, Launcher: mpirun.ProgramMpirun}, tt.job, nil, []string{"prog"})
		if tt.fail {
			if err == nil {
				t.Errorf("%+v: want an error for a node range", tt.job)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if i := indexOf(argv, "-n"); i < 0 || argv[i+1] != tt.np {
			t.Errorf("%+v: argv %q, want -n %s", tt.job, argv, tt.np)
		}
	}
	if _, err := Script(Request{Program: nil}); err == nil {
		t.Error("a script without a program was built")
	}
	// The srun line goes through the same checks as every launch line: a
	// bare ":" would start a second program.
	for _, l := range []mpirun.Program{mpirun.ProgramSrun, mpirun.ProgramMpirun} {
		_, err := LaunchLine(profile.MPI{Flavor: mpirun.MPICH, Launcher: l}, slurm.JobOptions{NTasks: 2}, nil, []string{"prog", ":", "x"})
		if err == nil || !strings.Contains(err.Error(), `":"`) {
			t.Errorf("launcher %s with a bare \":\" argument: err = %v", l, err)
		}
	}
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// The rendezvous port a batch script exports: envsetup.MasterPort's fixed
// layer, and nothing under job-id (each rank derives it from the job).
func TestSbatchMasterPort(t *testing.T) {
	job := slurm.JobOptions{Nodes: "2", NTasksPerNode: 4}
	for _, tc := range []struct {
		policy, port string
		want         string
	}{
		{"fixed", "12345", "batchkit_export MASTER_PORT 12345\n"},
		{"job-id", "12345", ""},
	} {
		text := render(t, "local", map[string]string{"rendezvous.port_policy": tc.policy, "rendezvous.port": tc.port}, job)
		got := ""
		for _, l := range strings.SplitAfter(text, "\n") {
			if strings.HasPrefix(l, "batchkit_export MASTER_PORT") {
				got += l
			}
		}
		if got != tc.want {
			t.Errorf("port_policy %s: MASTER_PORT lines %q, want %q", tc.policy, got, tc.want)
		}
	}
}

func TestNewPlan(t *testing.T) {
	prof := profile.Profile{MPI: profile.MPI{Flavor: mpirun.OpenMPI, Launcher: mpirun.ProgramSrun}}
	mpi := func(f mpirun.Flavor, l mpirun.Program) profile.Profile {
		return profile.Profile{MPI: profile.MPI{Flavor: f, Launcher: l}}
	}
	twoByTwo := slurm.JobOptions{Nodes: "2", NTasksPerNode: 2}
	bk := []string{"/bk", "exec", "--", "prog"}
	tests := []struct {
		name    string
		req     Request
		want    []string // the script's launch line
		wantErr string   // a launch.ErrInvalid error's text
	}{
		{"srun, built-in templates", Request{Profile: prof, Program: []string{"prog"}, Batchkit: "/bk", Wait: true},
			[]string{"env", "SLURM_KILL_BAD_EXIT=1", "srun", "--mpi=pmix", "--export=ALL", "/bk", "exec", "--", "prog"}, ""},
		{"no program", Request{Profile: prof}, nil, "no program given: batchkit sbatch [flags] -- CMD [ARGS...]"},
		{"bad nodes", Request{Profile: prof, Program: []string{"prog"}, Job: slurm.JobOptions{Nodes: "0"}}, nil,
			`--nodes "0": want a number of nodes N or a range MIN-MAX, at least 1`},
		// --no-fail-fast and --fail-fast reach every rank on the launch line,
		// by each launcher's own means, so that they win over a value
		// exported at submission.
		{"--no-fail-fast, srun: on srun's environment",
			Request{Profile: mpi(mpirun.MPICH, mpirun.ProgramSrun), Job: twoByTwo, Program: []string{"prog"}, Batchkit: "/bk", FailFast: "0"},
			append([]string{"env", "BATCHKIT_FAIL_FAST=0", "SLURM_KILL_BAD_EXIT=1", "srun", "--mpi=pmi2", "--export=ALL"}, bk...), ""},
		{"--no-fail-fast, hydra: -genv",
			Request{Profile: mpi(mpirun.MPICH, mpirun.ProgramMpirun), Job: twoByTwo, Program: []string{"prog"}, Batchkit: "/bk", FailFast: "0"},
			append([]string{"mpirun.mpich", "-bootstrap", "slurm", "-n", "4", "-ppn", "2", "-genv", "BATCHKIT_FAIL_FAST", "0"}, bk...), ""},
		{"--fail-fast, open mpi: -x",
			Request{Profile: mpi(mpirun.OpenMPI, mpirun.ProgramMpirun), Job: twoByTwo, Program: []string{"prog"}, Batchkit: "/bk", FailFast: "1"},
			append([]string{"mpirun.openmpi", "-np", "4", "--map-by", "ppr:2:node", "-x", "BATCHKIT_FAIL_FAST=1"}, bk...), ""},
		{"--no-fail-fast, mpirun_rsh: before the program",
			Request{Profile: mpi(mpirun.MVAPICH, mpirun.ProgramMpirun), Job: twoByTwo, Program: []string{"prog"}, Batchkit: "/bk", FailFast: "0"},
			append([]string{"mpirun_rsh", "-np", "4", "-ppn", "2", "BATCHKIT_FAIL_FAST=0"}, bk...), ""},
		// --requeue tells every rank (batchkit train warns when it has no
		// --checkpoint-dir), by the launcher's own means too.
		{"--requeue, srun",
			Request{Profile: mpi(mpirun.MPICH, mpirun.ProgramSrun), Job: slurm.JobOptions{Nodes: "2", Requeue: true}, Program: []string{"prog"}, Batchkit: "/bk"},
			append([]string{"env", "BATCHKIT_REQUEUE=1", "SLURM_KILL_BAD_EXIT=1", "srun", "--mpi=pmi2", "--export=ALL"}, bk...), ""},
		{"--requeue and --fail-fast, hydra",
			Request{Profile: mpi(mpirun.MPICH, mpirun.ProgramMpirun), Job: slurm.JobOptions{Nodes: "2", NTasksPerNode: 2, Requeue: true}, Program: []string{"prog"}, Batchkit: "/bk", FailFast: "1"},
			append([]string{"mpirun.mpich", "-bootstrap", "slurm", "-n", "4", "-ppn", "2", "-genv", "BATCHKIT_FAIL_FAST", "1", "-genv", "BATCHKIT_REQUEUE", "1"}, bk...), ""},
		{"a fail-fast value that is not 0 or 1", Request{Profile: prof, Program: []string{"prog"}, FailFast: "yes"}, nil,
			`BATCHKIT_FAIL_FAST="yes": want 0 or 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPlan(tt.req)
			if tt.wantErr != "" {
				if !errors.Is(err, launch.ErrInvalid) || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q (launch.ErrInvalid)", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, p.Script.Launch); diff != "" {
				t.Errorf("launch line (-want +got):\n%s", diff)
			}
			line, err := shquote.Join(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(p.Text, "\n"+line+" &\n") || p.Wait != tt.req.Wait {
				t.Errorf("text %q, wait %v", p.Text, p.Wait)
			}
		})
	}
}
