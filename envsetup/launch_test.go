package envsetup

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLaunchEnv(t *testing.T) {
	free := func() (int, error) { return 40123, nil }
	user := map[string]string{"CCL_WORKER_COUNT": "4", "FI_PROVIDER": "", "MASTER_ADDR": "mine", "MASTER_PORT": "1"}
	lookup := func(k string) (string, bool) { v, ok := user[k]; return v, ok }
	profile := map[string]string{"CCL_WORKER_COUNT": "1", "FI_PROVIDER": "tcp", "I_MPI_PIN_DOMAIN": "auto"}
	for _, tc := range []struct {
		name string
		in   LaunchInput
		want map[string]string
	}{
		{
			// A profile variable the user has, even set to empty, keeps the
			// user's value (as in batch scripts); the others keep the profile's.
			name: "the user's over the profile's", in: LaunchInput{Vars: profile, Hosts: []string{"n1"}, JobID: "7"},
			want: map[string]string{"CCL_WORKER_COUNT": "4", "FI_PROVIDER": "", "I_MPI_PIN_DOMAIN": "auto", "MASTER_ADDR": "n1", "MASTER_PORT": "15007"},
		},
		{
			name: "--env over both", in: LaunchInput{Vars: profile, Env: map[string]string{"CCL_WORKER_COUNT": "2", "MASTER_ADDR": "ib0", "MASTER_PORT": "5000"}},
			want: map[string]string{"CCL_WORKER_COUNT": "2", "FI_PROVIDER": "", "I_MPI_PIN_DOMAIN": "auto", "MASTER_ADDR": "ib0", "MASTER_PORT": "5000"},
		},
		{
			// The rendezvous is the launch's: an exported MASTER_* is not read.
			name: "local: a free port", in: LaunchInput{},
			want: map[string]string{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "40123"},
		},
		{
			name: "localhost", in: LaunchInput{Hosts: []string{"localhost", "n2"}},
			want: map[string]string{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "40123"},
		},
		{
			name: "--master-port over --env and the profile's", in: LaunchInput{Port: 6000, Fixed: 7000, JobID: "7", Env: map[string]string{"MASTER_PORT": "5000"}},
			want: map[string]string{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "6000"},
		},
		{
			name: "the profile's fixed port over the job's", in: LaunchInput{Fixed: 7000, JobID: "7"},
			want: map[string]string{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "7000"},
		},
		{
			name: "srun outside an allocation: no rendezvous", in: LaunchInput{Srun: true},
			want: map[string]string{},
		},
		{
			name: "srun in an allocation: the job's port", in: LaunchInput{Srun: true, JobID: "15001"},
			want: map[string]string{"MASTER_PORT": "15001"},
		},
		{
			name: "node count", in: LaunchInput{Hosts: []string{"n1", "n2"}, JobID: "7", Nodes: 2},
			want: map[string]string{"MASTER_ADDR": "n1", "MASTER_PORT": "15007", "BATCHKIT_MPIRUN_NUM_NODES": "2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Lookup, tc.in.Free = lookup, free
			got, err := LaunchEnv(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	_, err := LaunchEnv(LaunchInput{Lookup: lookup, Free: func() (int, error) { return 0, errors.New("none") }})
	if err == nil {
		t.Error("no free port: no error")
	}
}

// An outer launch's node count never reaches an inner launch's ranks: Hydra
// passes mpirun's whole environment on, and a stale count misplaces ranks.
// The token is forwarded only when the launcher can, kept when set.
func TestLauncherEnviron(t *testing.T) {
	gen := func() (string, error) { return "new", nil }
	in := []string{"A=1", "BATCHKIT_MPIRUN_NUM_NODES=3", "B=2", "BATCHKIT_MPIRUN_NUM_NODES=4", "BATCHKIT_MPIRUN_NUM_NODESX=5"}
	for _, tc := range []struct {
		name    string
		environ []string
		forward []string
		want    []string
	}{
		{"no token forwarded", in, nil, []string{"A=1", "B=2", "BATCHKIT_MPIRUN_NUM_NODESX=5"}},
		{"a new token", in, []string{"BATCHKIT_JOB_TOKEN"}, []string{"A=1", "B=2", "BATCHKIT_JOB_TOKEN=new", "BATCHKIT_MPIRUN_NUM_NODESX=5"}},
		{"the user's token", []string{"BATCHKIT_JOB_TOKEN=mine", "A=1"}, []string{"BATCHKIT_JOB_TOKEN"}, []string{"A=1", "BATCHKIT_JOB_TOKEN=mine"}},
	} {
		got, err := LauncherEnviron(tc.environ, tc.forward, gen)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
