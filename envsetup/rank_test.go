package envsetup

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/topology"
)

// local is rank of n on one machine, as batchkit run places them.
func local(rank, n, port int) topology.Topology {
	return topology.Topology{Launcher: topology.Torchrun, Rank: rank, WorldSize: n, LocalRank: rank, LocalWorldSize: n,
		NumNodes: 1, Hosts: []string{"127.0.0.1"}, MasterAddr: "127.0.0.1", MasterPort: port}
}

func TestTorchrunAndMerge(t *testing.T) {
	top := topology.Topology{Rank: 3, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2, NodeRank: 1, NumNodes: 2, MasterAddr: "node1", MasterPort: 15042}
	got := Merge([]string{"PATH=/bin", "RANK=99", "A=b=c"}, Changes{Set: Torchrun(top)})
	want := []string{"A=b=c", "GROUP_RANK=1", "GROUP_WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=node1",
		"MASTER_PORT=15042", "NODE_RANK=1", "PATH=/bin", "RANK=3", "WORLD_SIZE=4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Merge (-want +got):\n%s", diff)
	}
	if len(envvars.Torchrun) != len(Torchrun(top)) {
		t.Errorf("envvars.Torchrun lists %d keys, Torchrun has %d", len(envvars.Torchrun), len(Torchrun(top)))
	}
}

// batchkit run's ranks: the torchrun contract and the attempt's variables
// replace inherited values; the result is sorted.
func TestRankEnvRun(t *testing.T) {
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
			top := local(tt.rank, tt.n, tt.port)
			if err := top.Validate(); err != nil {
				t.Fatal(err)
			}
			in := RankInput{Topology: top, Environ: tt.base, Attempt: &Attempt{Token: tt.token, RunID: "run-1", MaxRestarts: 3}}
			ch, _ := RankEnv(in)
			if diff := cmp.Diff(tt.want, Merge(tt.base, ch)); diff != "" {
				t.Errorf("RankEnv (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPrecedence is the precedence rule (see rank.go), one row per pair of
// layers: which value a rank sees for a variable several layers set.
func TestPrecedence(t *testing.T) {
	top := local(1, 2, 40000) // rank 1 of 2; pinning below on 4 cores
	attempt := &Attempt{Token: "new", RunID: "run-1"}
	for _, tc := range []struct {
		name    string
		user    []string          // layer 2: exported before sourcing
		vars    map[string]string // layer 3: the profile's
		sourced Changes           // layer 4: the scripts'
		attempt *Attempt          // layer 1 with the topology
		pin     bool              // layer 5
		name1   string            // the variable looked at
		want    string            // its value; "-" for unset
	}{
		{name: "dictated over user", user: []string{"RANK=99"}, name1: "RANK", want: "1"},
		{name: "dictated over sourced", sourced: Changes{Set: map[string]string{"MASTER_PORT": "1"}}, name1: "MASTER_PORT", want: "40000"},
		{name: "dictated over a sourced unset", user: []string{"RANK=0"}, sourced: Changes{Unset: []string{"RANK"}}, name1: "RANK", want: "1"},
		{name: "attempt token over user's", user: []string{"BATCHKIT_JOB_TOKEN=old"}, attempt: attempt, name1: envvars.Token, want: "new"},
		{name: "no attempt: user's token passes", user: []string{"BATCHKIT_JOB_TOKEN=old"}, name1: envvars.Token, want: "old"},
		{name: "no attempt: no token", name1: envvars.Token, want: "-"},
		{name: "user over profile", user: []string{"FI_PROVIDER=psm3"}, vars: map[string]string{"FI_PROVIDER": "tcp"}, name1: "FI_PROVIDER", want: "psm3"},
		{name: "user's empty value over profile", user: []string{"FI_PROVIDER="}, vars: map[string]string{"FI_PROVIDER": "tcp"}, name1: "FI_PROVIDER", want: ""},
		{name: "user over profile over sourced", user: []string{"FI_PROVIDER=psm3"}, vars: map[string]string{"FI_PROVIDER": "tcp"},
			sourced: Changes{Set: map[string]string{"FI_PROVIDER": "shm"}}, name1: "FI_PROVIDER", want: "psm3"},
		{name: "profile over sourced", vars: map[string]string{"FI_PROVIDER": "tcp"}, sourced: Changes{Set: map[string]string{"FI_PROVIDER": "shm"}}, name1: "FI_PROVIDER", want: "tcp"},
		{name: "profile over a sourced unset", vars: map[string]string{"FI_PROVIDER": "tcp"}, sourced: Changes{Unset: []string{"FI_PROVIDER"}}, name1: "FI_PROVIDER", want: "tcp"},
		{name: "user over profile over a sourced unset", vars: map[string]string{"FI_PROVIDER": "tcp"}, user: []string{"FI_PROVIDER=x"},
			sourced: Changes{Unset: []string{"FI_PROVIDER"}}, name1: "FI_PROVIDER", want: "x"},
		{name: "sourced over user where the profile is silent", user: []string{"PATH=/bin"}, sourced: Changes{Set: map[string]string{"PATH": "/opt/bin:/bin"}}, name1: "PATH", want: "/opt/bin:/bin"},
		{name: "sourced unset", user: []string{"SETVARS_COMPLETED=1"}, sourced: Changes{Unset: []string{"SETVARS_COMPLETED"}}, name1: "SETVARS_COMPLETED", want: "-"},
		{name: "user over pinning", user: []string{"OMP_NUM_THREADS=7"}, pin: true, name1: "OMP_NUM_THREADS", want: "7"},
		{name: "profile over pinning", vars: map[string]string{"OMP_NUM_THREADS": "6"}, pin: true, name1: "OMP_NUM_THREADS", want: "6"},
		{name: "sourced over pinning", sourced: Changes{Set: map[string]string{"OMP_NUM_THREADS": "5"}}, pin: true, name1: "OMP_NUM_THREADS", want: "5"},
		{name: "pinning alone", pin: true, name1: "OMP_NUM_THREADS", want: "1"},
		{name: "pinning after a sourced unset", user: []string{"KMP_BLOCKTIME=200"}, sourced: Changes{Unset: []string{"KMP_BLOCKTIME"}}, pin: true, name1: "KMP_BLOCKTIME", want: "1"},
		{name: "no pinning", name1: "OMP_NUM_THREADS", want: "-"},
		{name: "inherited untouched", user: []string{"HOME=/home/u"}, name1: "HOME", want: "/home/u"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := RankInput{Topology: top, Attempt: tc.attempt, Environ: tc.user, Sourced: tc.sourced, Vars: tc.vars,
				Pin: tc.pin, CPUs: flat(0, 4, 4)}
			ch, _ := RankEnv(in)
			got := "-"
			if v, ok := Environ(Merge(tc.user, ch))[tc.name1]; ok {
				got = v
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.name1, diff)
			}
		})
	}
}

// Profiled is what detection reads: layers 2-4, none of the dictated.
func TestProfiled(t *testing.T) {
	in := RankInput{
		Environ: []string{"PATH=/bin", "FI_PROVIDER=psm3", "OLD=1"},
		Sourced: Changes{Set: map[string]string{"PATH": "/opt/bin:/bin", "FI_PROVIDER": "shm"}, Unset: []string{"OLD"}},
		Vars:    map[string]string{"FI_PROVIDER": "tcp", "CCL_WORKER_COUNT": "2"},
	}
	want := []string{"PATH=/opt/bin:/bin", "FI_PROVIDER=psm3", "CCL_WORKER_COUNT=2"}
	if diff := cmp.Diff(want, in.Profiled()); diff != "" {
		t.Errorf("Profiled (-want +got):\n%s", diff)
	}
}
