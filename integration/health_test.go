package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// slowRankScript runs its command pinned to core 0, except on rank $SLOW
// (RANK under batchkit run, SLURM_PROCID under srun): there on core 1,
// beside $HOGS busy loops of its own, at nice $NICE. The loops end with
// the rank, and after 120 s whatever happens (a rank killed by SIGKILL runs
// no trap). Other work on this shared machine, on both cores, evens out two
// loops alone (measured 1.7-1.9× in a loaded run, the threshold being
// 1.5×); at nice 5 beside them the rank was 11-19× slower.
const slowRankScript = `#!/bin/bash
r=${RANK:-$SLURM_PROCID}
if [ "$r" != "$SLOW" ]; then exec taskset -c 0 "$@"; fi
pids=()
for _ in $(seq "$HOGS"); do taskset -c 1 timeout 120 sh -c 'while :; do :; done' & pids+=($!); done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
taskset -c 1 nice -n "$NICE" "$@"
`

// healthOutlier is the part of an outlier the tests read.
type healthOutlier struct {
	Rank   int    `json:"rank"`
	Node   string `json:"node"`
	Metric string `json:"metric"`
	Text   string `json:"text"`
}

type healthReport struct {
	Ranks []struct {
		Rank    int     `json:"rank"`
		Node    string  `json:"node"`
		Compute float64 `json:"compute_seconds"`
		Wait    float64 `json:"wait_seconds"`
		LinkGBs float64 `json:"link_gbs"`
		ToNext  float64 `json:"to_next_gbs"`
		Prev    float64 `json:"from_prev_gbs"`
	} `json:"ranks"`
	Nodes []struct {
		Node string `json:"node"`
	} `json:"nodes"`
	Outliers []healthOutlier `json:"outliers"`
	Crowded  []struct {
		Host  string `json:"host"`
		Ranks []int  `json:"ranks"`
	} `json:"crowded"`
	Links []healthLink `json:"links"`
}

// healthLink is one ring link of the report.
type healthLink struct {
	From     int     `json:"from"`
	To       int     `json:"to"`
	FromNode string  `json:"from_node"`
	ToNode   string  `json:"to_node"`
	GBs      float64 `json:"gbs"`
	Error    string  `json:"error"`
}

// checkLinks fails t unless h has every ring link of n ranks measured
// (rank r → r+1 mod n), each rank's to-next and from-prev its two links,
// and returns the links that cross nodes as "rank r → s (a → b)".
func checkLinks(t *testing.T, h healthReport, n int) []string {
	t.Helper()
	if len(h.Links) != n || len(h.Ranks) != n {
		t.Fatalf("health: %d ring links, %d ranks: want %d of each\nlinks %+v", len(h.Links), len(h.Ranks), n, h.Links)
	}
	var cross []string
	for i, l := range h.Links {
		if l.From != i || l.To != (i+1)%n || !(l.GBs > 0) || l.Error != "" {
			t.Errorf("ring link %+v: want %d → %d measured", l, i, (i+1)%n)
		}
		if r := h.Ranks[i]; r.ToNext != l.GBs || h.Ranks[(i+1)%n].Prev != l.GBs {
			t.Errorf("link %d → %d at %v GB/s: rank %d's to-next is %v, rank %d's from-prev %v", l.From, l.To, l.GBs, i, r.ToNext, (i+1)%n, h.Ranks[(i+1)%n].Prev)
		}
		if l.FromNode != l.ToNode {
			cross = append(cross, fmt.Sprintf("rank %d → %d (%s → %s)", l.From, l.To, l.FromNode, l.ToNode))
		}
	}
	return cross
}

// healthOf finds the health report in rank 0's JSON output: train's
// summary object, or bench's {"health": ...} line.
func healthOf(t *testing.T, out string) healthReport {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimPrefix(l, "[0] ")
		if !strings.Contains(l, `"health":`) {
			continue
		}
		var v struct {
			Health *healthReport `json:"health"`
		}
		if err := json.Unmarshal([]byte(l), &v); err == nil && v.Health != nil {
			return *v.Health
		}
	}
	t.Fatalf("no health report in:\n%s", out)
	return healthReport{}
}

// trainCompute is a run whose steps are long compute bursts (10-25 ms): a
// rank that sleeps in collectives between short bursts is favoured by the
// scheduler when it wakes and would not be slowed by busy loops at all.
// Its 24 steps make the slow rank's excess (about 6× a step) well over the
// 0.5 s a rank must lose to be named, even on an idle machine.
var trainCompute = []string{"train", "--epochs", "2", "--hidden", "512,512", "--batch-size", "64", "--report", "--format", "json"}

// A rank on a core kept busy is named for its compute, alone (an outlier
// of any other metric names it too, nothing else): under batchkit run by
// its rank, on the two-node cluster (one rank a node) by its node. Then the
// same run without the busy loops names nobody.
func TestHealthReportNamesSlowRank(t *testing.T) {
	needCluster(t)
	needTool(t, "taskset")
	script := filepath.Join(t.TempDir(), "slow-rank.sh")
	if err := os.WriteFile(script, []byte(slowRankScript), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(script), 0o755)
	for _, tc := range []struct {
		name string
		cmd  []string
		want healthOutlier // the slow one's compute outlier
	}{
		{"batchkit run", append([]string{bin, "run", "-n", "2", "--", script, bin}, trainCompute...), healthOutlier{Rank: 1, Node: "", Metric: "compute"}},
		{"srun -N2", append([]string{"srun", "-N2", "-n2", "--time=5", script, bin}, trainCompute...), healthOutlier{Rank: -1, Node: "node2", Metric: "compute"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SLOW", "1")
			t.Setenv("HOGS", "2")
			t.Setenv("NICE", "5")
			h := healthOf(t, run(t, 3*time.Minute, tc.cmd[0], tc.cmd[1:]...))
			if len(h.Ranks) != 2 {
				t.Fatalf("health %+v: want 2 ranks", h)
			}
			slowNode := h.Ranks[1].Node
			var named []healthOutlier
			for _, o := range h.Outliers {
				if o.Rank != tc.want.Rank || o.Node != slowNode {
					t.Errorf("outlier %q: names another than rank 1 (%s)", o.Text, slowNode)
				}
				o.Text = ""
				named = append(named, o)
			}
			if tc.want.Node == "" {
				tc.want.Node = slowNode
			}
			if !slices.Contains(named, tc.want) {
				t.Errorf("outliers %+v: want %+v among them\nranks %+v", h.Outliers, tc.want, h.Ranks)
			}
			if h.Ranks[0].Wait <= h.Ranks[1].Wait {
				t.Errorf("rank 0 waited %.3f s, the slow rank 1 %.3f s: want rank 0 waiting on it", h.Ranks[0].Wait, h.Ranks[1].Wait)
			}
		})
	}
	for _, launch := range [][]string{{bin, "run", "-n", "2", "--"}, {"srun", "-N2", "-n2", "--time=5"}} {
		t.Run("no busy loops/"+filepath.Base(launch[0]), func(t *testing.T) {
			cmd := append(append(launch[1:], bin), trainCompute...)
			h := healthOf(t, run(t, 3*time.Minute, launch[0], cmd...))
			if len(h.Outliers) != 0 || len(h.Crowded) != 0 {
				t.Errorf("outliers %+v, crowded %+v in an even run: want none\nranks %+v", h.Outliers, h.Crowded, h.Ranks)
			}
			checkLinks(t, h, 2)
		})
	}
	// Four ranks on this machine's two CPUs wait for a CPU by turns: their
	// compute differed by up to 3× a step in even runs. The machine is
	// named as crowded, and nothing else.
	t.Run("srun -N2 -n4: crowded", func(t *testing.T) {
		h := healthOf(t, run(t, 3*time.Minute, "srun", append([]string{"-N2", "-n4", "--ntasks-per-node=2", "--time=5", bin}, trainCompute...)...))
		if len(h.Crowded) != 1 || len(h.Crowded[0].Ranks) != 4 {
			t.Errorf("crowded %+v: want this machine, with the 4 ranks", h.Crowded)
		}
		for _, o := range h.Outliers {
			t.Errorf("outlier %q on a crowded machine", o.Text)
		}
		want := []string{"rank 1 → 2 (node1 → node2)", "rank 3 → 0 (node2 → node1)"}
		if diff := cmp.Diff(want, checkLinks(t, h, 4)); diff != "" {
			t.Errorf("ring links across nodes (-want +got):\n%s", diff)
		}
	})
}

// bench --report on the two nodes: one {"health": ...} line after the
// results, a row per node, every link measured, both ring links crossing
// the nodes; the results still read back (bench FILE).
func TestBenchReportTwoNodes(t *testing.T) {
	needCluster(t)
	out := run(t, 2*time.Minute, "srun", "-N2", "-n2", "--time=5", bin, "bench", "--max-bytes", "64K", "--iters", "20", "--report", "--format", "json")
	h := healthOf(t, out)
	if len(h.Ranks) != 2 || len(h.Nodes) != 2 || h.Nodes[0].Node != "node1" || h.Nodes[1].Node != "node2" {
		t.Fatalf("health %+v: want 2 ranks on node1 and node2", h)
	}
	for _, r := range h.Ranks {
		if !(r.LinkGBs > 0) {
			t.Errorf("rank %d: link %v GB/s, want it measured", r.Rank, r.LinkGBs)
		}
	}
	want := []string{"rank 0 → 1 (node1 → node2)", "rank 1 → 0 (node2 → node1)"}
	if diff := cmp.Diff(want, checkLinks(t, h, 2)); diff != "" {
		t.Errorf("ring links across nodes (-want +got):\n%s", diff)
	}
	file := filepath.Join(t.TempDir(), "b.jsonl")
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if back := run(t, time.Minute, bin, "bench", file); !strings.Contains(back, "64 KiB") {
		t.Errorf("bench %s printed %q: want the results read back", file, back)
	}
}
