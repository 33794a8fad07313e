package ccl

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective/backend"
)

func flatCPUs(ids ...int) envsetup.CPUSet {
	s := envsetup.CPUSet{Online: 8}
	for _, id := range ids {
		s.Allowed = append(s.Allowed, envsetup.CPU{ID: id, Core: id})
	}
	return s
}

// TestEnv: what the backend sets before oneCCL reads its environment, and
// the settings it refuses with the fix.
func TestEnv(t *testing.T) {
	interfaces = func() ([]string, error) { return []string{"lo", "eth0"}, nil }
	run := topology.Topology{Launcher: topology.Torchrun, Rank: 1, WorldSize: 2, LocalRank: 1, LocalWorldSize: 2, NumNodes: 1}
	hydra := run
	hydra.Launcher = topology.Hydra
	twoNodes := run // 2 nodes × 2 ranks
	twoNodes.WorldSize, twoNodes.NumNodes = 4, 2
	for _, tc := range []struct {
		name    string
		topo    topology.Topology
		cpus    envsetup.CPUSet
		env     map[string]string
		want    map[string]string
		wantErr string
	}{
		{name: "batchkit run, 4 cores for 2 ranks: envsetup's launcher rules",
			topo: run, cpus: flatCPUs(0, 1, 2, 3),
			want: map[string]string{"CCL_ATL_TRANSPORT": "ofi", "CCL_PROCESS_LAUNCHER": "none", "CCL_LOCAL_RANK": "1", "CCL_LOCAL_SIZE": "2", "CCL_ATL_SHM": "1"}},
		{name: "one core per rank: the worker off",
			topo: run, cpus: flatCPUs(0, 1),
			want: map[string]string{"CCL_ATL_TRANSPORT": "ofi", "CCL_PROCESS_LAUNCHER": "none", "CCL_LOCAL_RANK": "1", "CCL_LOCAL_SIZE": "2", "CCL_WORKER_OFFLOAD": "0", "CCL_ATL_SHM": "1"}},
		{name: "two nodes: no shm transport (oneCCL groups its peers by host name)",
			topo: twoNodes, cpus: flatCPUs(0, 1, 2, 3),
			want: map[string]string{"CCL_ATL_TRANSPORT": "ofi", "CCL_PROCESS_LAUNCHER": "none", "CCL_LOCAL_RANK": "1", "CCL_LOCAL_SIZE": "2"}},
		{name: "Hydra: oneCCL reads Hydra's own variables",
			topo: hydra, cpus: flatCPUs(0, 1, 2, 3),
			want: map[string]string{"CCL_ATL_TRANSPORT": "ofi", "CCL_PROCESS_LAUNCHER": "hydra", "CCL_ATL_SHM": "1"}},
		{name: "the environment's values are kept",
			topo: run, cpus: flatCPUs(0, 1),
			env:  map[string]string{"CCL_ATL_TRANSPORT": "ofi", "CCL_LOCAL_RANK": "1", "CCL_WORKER_OFFLOAD": "1", "CCL_ATL_SHM": "0"},
			want: map[string]string{"CCL_PROCESS_LAUNCHER": "none", "CCL_LOCAL_SIZE": "2"}},
		{name: "the MPI transport is refused with the fix",
			topo: run, env: map[string]string{"CCL_ATL_TRANSPORT": "mpi"},
			wantErr: "CCL_ATL_TRANSPORT=mpi: batchkit's ccl backend needs ofi (its ranks meet over batchkit's rendezvous, and its max and min are oneCCL custom reductions, which exist on ofi only; mpi works only under Intel MPI's own mpiexec): unset CCL_ATL_TRANSPORT or set it to ofi"},
		{name: "a KVS interface that does not exist",
			topo: run, env: map[string]string{"CCL_KVS_IFACE": "ib0"},
			wantErr: "CCL_KVS_IFACE=ib0: no such network interface here (lo, eth0), so oneCCL's KVS cannot bind: unset it or name one of these"},
		{name: "a worker core outside the rank's CPU set",
			topo: run, cpus: flatCPUs(2, 3), env: map[string]string{"CCL_WORKER_AFFINITY": "1,7"},
			wantErr: `CCL_WORKER_AFFINITY=1,7 gives local rank 1's worker core 7, outside its CPU set 2,3: oneCCL would fail with "failed to start worker"; unset CCL_WORKER_AFFINITY or list cores of that set`},
		{name: "a worker core inside it",
			topo: run, cpus: flatCPUs(2, 3), env: map[string]string{"CCL_WORKER_AFFINITY": "7,3", "CCL_ATL_TRANSPORT": "ofi", "CCL_PROCESS_LAUNCHER": "none", "CCL_LOCAL_RANK": "1", "CCL_LOCAL_SIZE": "2"},
			want: map[string]string{"CCL_WORKER_OFFLOAD": "0", "CCL_ATL_SHM": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Env(tc.topo, tc.cpus, topology.MapEnv(tc.env))
			if tc.wantErr != "" {
				var se *backend.SetupError
				if err == nil || err.Error() != tc.wantErr || !errors.As(err, &se) {
					t.Fatalf("err = %v, want the *SetupError %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("set (-want +got):\n%s", d)
			}
		})
	}
}

func TestErrorHints(t *testing.T) {
	for _, tc := range []struct{ name, msg, want string }{
		{"worker affinity", "oneCCL: exec.cpp:122 start_workers: EXCEPTION: failed to start worker # 0",
			"oneCCL create_communicator: oneCCL: exec.cpp:122 start_workers: EXCEPTION: failed to start worker # 0: its worker thread could not be pinned to the core CCL_WORKER_AFFINITY gives it (outside this rank's CPU set?): unset CCL_WORKER_AFFINITY, or list cores of the rank's set"},
		{"no hint", "oneCCL: something else", "oneCCL create_communicator: oneCCL: something else"},
	} {
		if got := (&Error{Call: "create_communicator", Code: 1, Msg: tc.msg}).Error(); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestHandoffAt(t *testing.T) {
	for _, c := range []struct {
		env  string
		want int
		err  bool
	}{{"", HandoffDefault, false}, {"0", 0, false}, {"65536", 65536, false}, {"-1", 0, true}, {"1MiB", 0, true}} {
		got, err := handoffAt(func(k string) string {
			if k == "BATCHKIT_CCL_HANDOFF" {
				return c.env
			}
			return ""
		})
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("BATCHKIT_CCL_HANDOFF=%q: got %d, %v; want %d, error %v", c.env, got, err, c.want, c.err)
		}
	}
}
