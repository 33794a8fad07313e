package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/internal/jsonstr"
	"github.com/batchkit/batchkit/launch/mpilaunch"
)

// --dry-run --format json prints the launch as one JSON line that a script
// can run from: argv, every rank's variables, what the launcher must have in
// its own environment, a generated hostfile, the profile's scripts.
func TestMpirunDryRunJSON(t *testing.T) {
	for _, k := range []string{"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_TASKS_PER_NODE", "BATCHKIT_PROFILE"} {
		t.Setenv(k, "")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(program ...string) []string { return append([]string{self, "exec", "--"}, program...) }
	tests := []struct {
		name string
		args []string
		want mpilaunch.DryRunJSON
	}{
		{
			name: "hydra with --no-fail-fast: BATCHKIT_FAIL_FAST=0 by -genv",
			args: []string{"--flavor", "mpich", "--mpirun", "mpirun.mpich", "-n", "3", "--master-port", "29999", "--no-fail-fast", "--", "python3", "train.py"},
			want: mpilaunch.DryRunJSON{
				Argv: jsonstr.Strings(append([]string{"mpirun.mpich", "-n", "3", "-genv", "BATCHKIT_FAIL_FAST", "0", "-genv", "MASTER_ADDR", "127.0.0.1",
					"-genv", "MASTER_PORT", "29999"}, wrap("python3", "train.py")...)),
				Env:        map[string]jsonstr.String{"BATCHKIT_FAIL_FAST": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"},
				ForwardEnv: []string{"BATCHKIT_JOB_TOKEN"}, Flavor: "mpich", Launcher: "mpirun", NP: 3,
			},
		},
		{
			name: "open mpi with --env and --fail-fast: the token forwarded by name",
			args: []string{"--flavor", "openmpi", "--mpirun", "mpirun.openmpi", "-n", "2", "--master-port", "29999", "--env", "A=b c", "--fail-fast", "--", "true"},
			want: mpilaunch.DryRunJSON{
				Argv: jsonstr.Strings(append([]string{"mpirun.openmpi", "-np", "2", "-x", "A=b c", "-x", "BATCHKIT_FAIL_FAST=1", "-x", "MASTER_ADDR=127.0.0.1",
					"-x", "MASTER_PORT=29999", "-x", "BATCHKIT_JOB_TOKEN"}, wrap("true")...)),
				Env:        map[string]jsonstr.String{"A": "b c", "BATCHKIT_FAIL_FAST": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"},
				ForwardEnv: []string{"BATCHKIT_JOB_TOKEN"}, Flavor: "openmpi", Launcher: "mpirun", NP: 2,
			},
		},
		{
			name: "mpirun_rsh: a generated hostfile, nothing forwarded",
			args: []string{"--flavor", "mvapich", "--hosts", "a,b", "--ppn", "2", "--master-port", "29999", "--", "./a.out"},
			want: mpilaunch.DryRunJSON{
				Argv: jsonstr.Strings(append([]string{"mpirun_rsh", "-np", "4", "-ppn", "2", "-hostfile", "batchkit.hostfile",
					"BATCHKIT_MPIRUN_NUM_NODES=2", "MASTER_ADDR=a", "MASTER_PORT=29999"}, wrap("./a.out")...)),
				Env:        map[string]jsonstr.String{"BATCHKIT_MPIRUN_NUM_NODES": "2", "MASTER_ADDR": "a", "MASTER_PORT": "29999"},
				ForwardEnv: []string{}, Hostfile: &mpilaunch.HostfileJSON{Path: "batchkit.hostfile", Text: "a:2\nb:2\n"},
				Flavor: "mvapich", Launcher: "mpirun", NP: 4,
			},
		},
		{
			name: "arguments of any bytes come back whole: invalid UTF-8 as \\udcXX",
			args: []string{"--flavor", "openmpi", "--mpirun", "mpirun.openmpi", "-n", "1", "--master-port", "29999", "--env", "V=\xfe", "--", "echo", "a\xffb", "a\xfeb"},
			want: mpilaunch.DryRunJSON{
				Argv: jsonstr.Strings(append([]string{"mpirun.openmpi", "-np", "1", "-x", "MASTER_ADDR=127.0.0.1",
					"-x", "MASTER_PORT=29999", "-x", "V=\xfe", "-x", "BATCHKIT_JOB_TOKEN"}, wrap("echo", "a\xffb", "a\xfeb")...)),
				Env:        map[string]jsonstr.String{"V": "\xfe", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"},
				ForwardEnv: []string{"BATCHKIT_JOB_TOKEN"}, Flavor: "openmpi", Launcher: "mpirun", NP: 1,
			},
		},
		{
			name: "a profile's scripts: bash lines to source first",
			args: []string{"--profile", "intel-oneccl", "--mpirun", "mpirun", "-n", "2", "--master-port", "29999", "--", "true"},
			want: mpilaunch.DryRunJSON{
				Argv: jsonstr.Strings(append([]string{"mpirun", "-n", "2", "-genv", "BATCHKIT_PIN", "1", "-genv", "CCL_LOG_LEVEL", "warn",
					"-genv", "CCL_WORKER_COUNT", "1", "-genv", "FI_PROVIDER", "tcp", "-genv", "I_MPI_FABRICS", "shm:ofi",
					"-genv", "I_MPI_PIN_DOMAIN", "auto", "-genv", "MASTER_ADDR", "127.0.0.1", "-genv", "MASTER_PORT", "29999", "-disable-auto-cleanup"}, wrap("true")...)),
				Env: map[string]jsonstr.String{"BATCHKIT_PIN": "1", "CCL_LOG_LEVEL": "warn", "CCL_WORKER_COUNT": "1", "FI_PROVIDER": "tcp",
					"I_MPI_FABRICS": "shm:ofi", "I_MPI_PIN_DOMAIN": "auto", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"},
				ForwardEnv: []string{"BATCHKIT_JOB_TOKEN"},
				Setup:      "source /opt/intel/oneapi/setvars.sh --force\nsource /opt/intel/oneapi/ccl/latest/env/vars.sh --ccl-configuration=cpu_gpu_dpcpp\n",
				Flavor:     "intelmpi", Launcher: "mpirun", NP: 2,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"batchkit", "mpirun", "--dry-run", "--format", "json"}, tt.args...)
			if code := Main(args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.Bytes())
			}
			if n := strings.Count(stdout.String(), "\n"); n != 1 {
				t.Errorf("%d lines, want one:\n%s", n, stdout.Bytes())
			}
			var got mpilaunch.DryRunJSON
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("%v:\n%s", err, stdout.Bytes())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
