package failfast

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/topology"
)

func TestFromEnv(t *testing.T) {
	hydra := topology.Topology{Launcher: topology.Hydra, Rank: 2, WorldSize: 3, MasterAddr: "node1", MasterPort: 29500}
	openmpi := hydra
	openmpi.Launcher = topology.OpenMPI
	one := hydra
	one.WorldSize, one.Rank = 1, 0
	on := Config{Rank: 2, Size: 3, Addr: "node1", Port: 30524, Token: "tok",
		Grace: DefaultGrace, JoinTimeout: DefaultJoinTimeout, ExitWait: DefaultExitWait}
	tests := []struct {
		name    string
		env     map[string]string
		top     topology.Topology
		want    Config
		wantOn  bool
		wantErr bool
	}{
		{"hydra with a token", map[string]string{"BATCHKIT_JOB_TOKEN": "tok"}, hydra, on, true, false},
		{"hydra, turned off", map[string]string{"BATCHKIT_JOB_TOKEN": "tok", "BATCHKIT_FAIL_FAST": "0"}, hydra, Config{}, false, false},
		{"hydra without a token", nil, hydra, Config{}, false, false},
		{"open mpi stops the job itself", map[string]string{"BATCHKIT_JOB_TOKEN": "tok"}, openmpi, Config{}, false, false},
		{"forced under open mpi", map[string]string{"BATCHKIT_JOB_TOKEN": "tok", "BATCHKIT_FAIL_FAST": "1"}, openmpi, on, true, false},
		{"forced without a token", map[string]string{"BATCHKIT_FAIL_FAST": "1"}, hydra, Config{}, false, true},
		{"one rank", map[string]string{"BATCHKIT_JOB_TOKEN": "tok", "BATCHKIT_FAIL_FAST": "1"}, one, Config{}, false, false},
		{"bad value", map[string]string{"BATCHKIT_FAIL_FAST": "yes"}, hydra, Config{}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token := func() (string, error) {
				if tok := tt.env["BATCHKIT_JOB_TOKEN"]; tok != "" {
					return tok, nil
				}
				return "", errors.New("no job id")
			}
			got, gotOn, err := FromEnv(func(k string) string { return tt.env[k] }, tt.top, token)
			if (err != nil) != tt.wantErr || gotOn != tt.wantOn {
				t.Fatalf("on %v err %v, want on %v err %v", gotOn, err, tt.wantOn, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

// An srun told SLURM_KILL_BAD_EXIT (batchkit's srun lines set 1) stops
// the step itself: detection says so (Topology.KillOnBadExit; detect's
// TestLauncherFacts has how srun parses the value, and that it counts
// under srun only).
func TestFromEnvSrunKillsOnBadExit(t *testing.T) {
	token := func() (string, error) { return "tok", nil }
	tests := []struct {
		name     string
		launcher topology.Launcher
		kill     bool
		watches  bool
	}{
		{"srun", topology.Slurm, false, true},
		{"srun --kill-on-bad-exit", topology.Slurm, true, false},
		{"hydra", topology.Hydra, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top := topology.Topology{Launcher: tt.launcher, Rank: 1, WorldSize: 2, MasterAddr: "node1", MasterPort: 29500,
				KillOnBadExit: tt.kill}
			if _, on, err := FromEnv(func(string) string { return "" }, top, token); err != nil || on != tt.watches {
				t.Errorf("watches %v (err %v), want %v", on, err, tt.watches)
			}
			// BATCHKIT_FAIL_FAST=1 watches anyway.
			forced := func(k string) string { return map[string]string{"BATCHKIT_FAIL_FAST": "1"}[k] }
			if _, on, err := FromEnv(forced, top, token); err != nil || !on {
				t.Errorf("with BATCHKIT_FAIL_FAST=1: watches %v (err %v)", on, err)
			}
		})
	}
}

// Unset, BATCHKIT_FAIL_FAST watches under the launchers that let the
// other ranks run on: every launcher's traits row decides (topology's
// TestTraits pins each decision, the row says why).
func TestFromEnvByLauncher(t *testing.T) {
	token := func() (string, error) { return "tok", nil }
	for _, l := range topology.Launchers {
		t.Run(string(l), func(t *testing.T) {
			top := topology.Topology{Launcher: l, Rank: 1, WorldSize: 2, MasterAddr: "node1", MasterPort: 29500}
			// BATCHKIT_FAIL_FAST unset, 0 and 1.
			want := []bool{l.Traits().LeavesRanksRunning, false, true}
			var got []bool
			for _, v := range []string{"", "0", "1"} {
				_, on, err := FromEnv(func(k string) string { return map[string]string{"BATCHKIT_FAIL_FAST": v}[k] }, top, token)
				if err != nil {
					t.Fatalf("BATCHKIT_FAIL_FAST=%q: %v", v, err)
				}
				got = append(got, on)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("watches with BATCHKIT_FAIL_FAST unset, 0, 1 (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWatchPort(t *testing.T) {
	ports := []int{15000, 18992, 28975, 28976, 29500, 29999, 1024, 14999, 45000, 65535}
	want := []int{1024, 5016, 14999, 30000, 30524, 31023, 2048, 31023, 1024, 6559}
	var got []int
	for _, p := range ports {
		got = append(got, WatchPort(p))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Every derived MASTER_PORT gets its own watch port, below Linux's
	// ephemeral range and outside the derived range, never its own port.
	seen := map[int]int{}
	for p := topology.PortBase; p < topology.PortBase+topology.PortRange; p++ {
		w := WatchPort(p)
		if w < 1024 || w >= 32768 || (w >= topology.PortBase && w < topology.PortBase+topology.PortRange) {
			t.Fatalf("WatchPort(%d) = %d: in the derived or ephemeral range, or privileged", p, w)
		}
		if q, ok := seen[w]; ok {
			t.Fatalf("WatchPort(%d) = WatchPort(%d) = %d", p, q, w)
		}
		seen[w] = p
	}
}
