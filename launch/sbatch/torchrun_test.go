package sbatch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/profile"
	"github.com/batchkit/batchkit/slurm"
)

// --torchrun: one task per node, under any launcher, runs torchrun with
// the node's workers; bad counts are refused.
func TestScriptTorchrun(t *testing.T) {
	srun := profile.MPI{Flavor: mpirun.MPICH, Launcher: mpirun.ProgramSrun}
	hydra := profile.MPI{Flavor: mpirun.MPICH, Launcher: mpirun.ProgramMpirun}
	shell := func(n int) string { return fmt.Sprintf(torchrunShell, n) }
	two := slurm.JobOptions{Nodes: "2"}
	for _, tc := range []struct {
		name    string
		mpi     profile.MPI
		python  string
		job     slurm.JobOptions
		nproc   int
		want    []string // the launch line
		perNode string   // the #SBATCH --ntasks-per-node value
		wantErr string
	}{
		{name: "srun", mpi: srun, job: two, nproc: 2, perNode: "1",
			want: []string{"env", "SLURM_KILL_BAD_EXIT=1", "srun", "--mpi=pmi2", "--export=ALL", "/bk", "exec", "--", "sh", "-c", shell(2), "python3", "--redirects", "1", "train.py"}},
		{name: "the profile's python", mpi: srun, python: "/usr/bin/python3", job: two, nproc: 4, perNode: "1",
			want: []string{"env", "SLURM_KILL_BAD_EXIT=1", "srun", "--mpi=pmi2", "--export=ALL", "/bk", "exec", "--", "sh", "-c", shell(4), "/usr/bin/python3", "--redirects", "1", "train.py"}},
		{name: "mpirun: one rank per node", mpi: hydra, job: slurm.JobOptions{Nodes: "3", NTasksPerNode: 1}, nproc: 2, perNode: "1",
			want: []string{"mpirun.mpich", "-bootstrap", "slurm", "-n", "3", "-ppn", "1", "/bk", "exec", "--", "sh", "-c", shell(2), "python3", "--redirects", "1", "train.py"}},
		{name: "without: unchanged", mpi: srun, job: slurm.JobOptions{Nodes: "2", NTasksPerNode: 4}, perNode: "4",
			want: []string{"env", "SLURM_KILL_BAD_EXIT=1", "srun", "--mpi=pmi2", "--export=ALL", "/bk", "exec", "--", "--redirects", "1", "train.py"}},
		{name: "negative", mpi: srun, job: two, nproc: -1, wantErr: "--torchrun -1: want the number of workers on each node, at least 1"},
		{name: "ntasks-per-node", mpi: srun, job: slurm.JobOptions{Nodes: "2", NTasksPerNode: 2}, nproc: 2,
			wantErr: "--torchrun runs one task per node, whose torchrun starts the 2 workers: drop --ntasks and --ntasks-per-node"},
		{name: "ntasks", mpi: srun, job: slurm.JobOptions{NTasks: 4}, nproc: 2,
			wantErr: "--torchrun runs one task per node, whose torchrun starts the 2 workers: drop --ntasks and --ntasks-per-node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prof := profile.Profile{MPI: tc.mpi, Env: profile.Env{Python: tc.python}}
			s, err := Script(Request{Profile: prof, Job: tc.job, Program: []string{"--redirects", "1", "train.py"}, Batchkit: "/bk", Torchrun: tc.nproc})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, s.Launch); diff != "" {
				t.Errorf("launch line (-want +got):\n%s", diff)
			}
			perNode := ""
			for _, d := range s.Directives {
				if d.Flag == "ntasks-per-node" {
					perNode = d.Value
				}
			}
			if perNode != tc.perNode {
				t.Errorf("#SBATCH --ntasks-per-node=%q, want %q", perNode, tc.perNode)
			}
		})
	}
}

// The shell line hands torchrun what batchkit exec exported, and the
// user's words after its own, each one word whatever it holds.
func TestTorchrunShell(t *testing.T) {
	// The "python": prints its arguments, one a field.
	python := filepath.Join(t.TempDir(), "python")
	if err := os.WriteFile(python, []byte("#!/bin/sh\nprintf '%s|' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", fmt.Sprintf(torchrunShell, 2), python, "--tee", "1", "my script.py", "$HOME")
	cmd.Env = []string{"GROUP_WORLD_SIZE=2", "GROUP_RANK=1", "MASTER_ADDR=node1", "MASTER_PORT=15042", "PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "-m|torch.distributed.run|--nnodes|2|--node_rank|1|--master_addr|node1|--master_port|15042|--nproc_per_node|2|" +
		"--tee|1|my script.py|$HOME|"
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("torchrun's arguments (-want +got):\n%s", diff)
	}
}
