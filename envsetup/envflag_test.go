package envsetup

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSharedEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []string
		want    map[string]string
		err     error  // the ErrEnv value; nil: accepted
		msg     string // the CLI's message
	}{
		{name: "none", want: map[string]string{}},
		{name: "the last of a name wins; = and , in values", entries: []string{"A=1", "B=x=y,z", "A=2", "C="},
			want: map[string]string{"A": "2", "B": "x=y,z", "C": ""}},
		{name: "the rendezvous is the user's to set", entries: []string{"MASTER_ADDR=ib0", "MASTER_PORT=5000"},
			want: map[string]string{"MASTER_ADDR": "ib0", "MASTER_PORT": "5000"}},
		{name: "no value", entries: []string{"A=1", "NOVALUE"}, err: ErrEnvSyntax,
			msg: `invalid --env "NOVALUE": want NAME=VALUE with NAME of letters, digits and _`},
		{name: "bad name", entries: []string{"1A=x"}, err: ErrEnvSyntax,
			msg: `invalid --env "1A=x": want NAME=VALUE with NAME of letters, digits and _`},
		{name: "the token, value not echoed", entries: []string{"BATCHKIT_JOB_TOKEN=shh"}, err: ErrEnvToken,
			msg: "--env BATCHKIT_JOB_TOKEN would put the job token on the launcher's command line, which every user can read: export BATCHKIT_JOB_TOKEN instead"},
		{name: "the node count", entries: []string{"BATCHKIT_MPIRUN_NUM_NODES=3"}, err: ErrEnvNodes,
			msg: `invalid --env "BATCHKIT_MPIRUN_NUM_NODES=3": batchkit mpirun sets BATCHKIT_MPIRUN_NUM_NODES from the hosts it places ranks on`},
		{name: "per rank", entries: []string{"RANK=5"}, err: ErrEnvPerRank,
			msg: `invalid --env "RANK=5": batchkit exec sets RANK on every rank (it differs from rank to rank)`},
		{name: "per rank too", entries: []string{"GROUP_WORLD_SIZE=2"}, err: ErrEnvPerRank,
			msg: `invalid --env "GROUP_WORLD_SIZE=2": batchkit exec sets GROUP_WORLD_SIZE on every rank (it differs from rank to rank)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SharedEnv(tc.entries)
			if tc.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			var ee *EnvError
			if !errors.As(err, &ee) || !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want an *EnvError wrapping %v", err, tc.err)
			}
			if err.Error() != tc.msg {
				t.Errorf("message:\n got %s\nwant %s", err, tc.msg)
			}
		})
	}
}
