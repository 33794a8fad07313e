package local

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRankEnv(t *testing.T) {
	base := []string{"HOME=/home/u", "PATH=/bin", "RANK=99", "MASTER_PORT=1", "BATCHKIT_JOB_TOKEN=old"}
	tests := []struct {
		name       string
		rank, n    int
		port       int
		token      string
		base, want []string
	}{
		{
			name: "rank 0 of 1", rank: 0, n: 1, port: 29500, token: "tok", base: []string{"PATH=/bin"},
			want: []string{
				"BATCHKIT_JOB_TOKEN=tok", "GROUP_RANK=0", "GROUP_WORLD_SIZE=1", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1",
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", "NODE_RANK=0", "PATH=/bin", "RANK=0", "TORCHELASTIC_MAX_RESTARTS=3", "TORCHELASTIC_RESTART_COUNT=0", "TORCHELASTIC_RUN_ID=run-1", "WORLD_SIZE=1",
			},
		},
		{
			name: "rank 2 of 4 replaces inherited values", rank: 2, n: 4, port: 40001, token: "abc", base: base,
			want: []string{
				"BATCHKIT_JOB_TOKEN=abc", "GROUP_RANK=0", "GROUP_WORLD_SIZE=1", "HOME=/home/u", "LOCAL_RANK=2",
				"LOCAL_WORLD_SIZE=4", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=40001", "NODE_RANK=0", "PATH=/bin",
				"RANK=2", "TORCHELASTIC_MAX_RESTARTS=3", "TORCHELASTIC_RESTART_COUNT=0", "TORCHELASTIC_RUN_ID=run-1", "WORLD_SIZE=4",
			},
		},
		{
			name: "empty base", rank: 3, n: 4, port: 1, token: "t", base: nil,
			want: []string{
				"BATCHKIT_JOB_TOKEN=t", "GROUP_RANK=0", "GROUP_WORLD_SIZE=1", "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=4",
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT=1", "NODE_RANK=0", "RANK=3", "TORCHELASTIC_MAX_RESTARTS=3", "TORCHELASTIC_RESTART_COUNT=0", "TORCHELASTIC_RUN_ID=run-1", "WORLD_SIZE=4",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top := RankTopology(tt.rank, tt.n, tt.port)
			if err := top.Validate(); err != nil {
				t.Fatal(err)
			}
			got := RankEnv(tt.base, top, Attempt{Token: tt.token, RunID: "run-1", MaxRestarts: 3})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("RankEnv (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLookupEnv(t *testing.T) {
	env := []string{"A=1", "B=", "A=2", "C"}
	for k, want := range map[string]string{"A": "2", "B": "", "C": "", "D": ""} {
		if got := lookupEnv(env, k); got != want {
			t.Errorf("lookupEnv(%q) = %q, want %q", k, got, want)
		}
	}
}

func TestNewToken(t *testing.T) {
	a, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newToken()
	if len(a) != 64 || a == b {
		t.Errorf("tokens %q and %q: want two different 64-digit hex strings", a, b)
	}
}
