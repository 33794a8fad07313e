package topology

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPortForJob(t *testing.T) {
	tests := []struct {
		job  string
		want int
	}{
		{"", DefaultPort},
		{"0", 15000},
		{"1", 15001},
		{"14999", 29999},
		{"15000", 15000},
		{"123456", 15000 + 123456%15000},
		{"18446744073709551615", 15000 + int(uint64(18446744073709551615)%15000)},
	}
	for _, tt := range tests {
		if got := PortForJob(tt.job); got != tt.want {
			t.Errorf("PortForJob(%q) = %d, want %d", tt.job, got, tt.want)
		}
	}
	// Non-numeric ids hash into the same range, deterministically.
	for _, id := range []string{"1231355905.1", "abc-123", "kvs_4242_0", "x"} {
		p := PortForJob(id)
		if p < PortBase || p >= PortBase+PortRange || p != PortForJob(id) {
			t.Errorf("PortForJob(%q) = %d, want a stable port in [%d,%d)", id, p, PortBase, PortBase+PortRange)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Topology{Launcher: Slurm, Rank: 3, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2, NodeRank: 1, NumNodes: 2, MasterPort: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid topology rejected: %v", err)
	}
	bad := map[string]func(*Topology){
		"world size 0":       func(t *Topology) { t.WorldSize = 0 },
		"rank = world":       func(t *Topology) { t.Rank = 4 },
		"local rank = local": func(t *Topology) { t.LocalRank = 2 },
		"local > world":      func(t *Topology) { t.LocalWorldSize = 5 },
		"node = nodes":       func(t *Topology) { t.NodeRank = 2 },
		"nodes > world":      func(t *Topology) { t.NumNodes = 5 },
		"port > 65535":       func(t *Topology) { t.MasterPort = 70000 },
	}
	for name, mutate := range bad {
		tt := ok
		mutate(&tt)
		if err := tt.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestInt(t *testing.T) {
	get := MapEnv(map[string]string{"A": "3", "B": "3", "C": "4", "BAD": "3x", "SP": " 5 "})
	if v, err := Int(get, Slurm, "rank", "NONE", "A", "B"); err != nil || v.N != 3 || v.Var != "A" {
		t.Errorf("Int(A,B) = %+v, %v", v, err)
	}
	if v, _ := Int(get, Slurm, "rank", "SP"); v.N != 5 {
		t.Errorf("Int(SP) = %+v: surrounding blanks should be ignored", v)
	}
	if v, err := Int(get, Slurm, "rank", "NONE"); err != nil || v.Set() {
		t.Errorf("Int(NONE) = %+v, %v; want unset", v, err)
	}
	_, err := Int(get, Slurm, "rank", "A", "C")
	if err == nil || !strings.Contains(err.Error(), "A=3 but C=4") {
		t.Errorf("Int(A,C) error = %v", err)
	}
	_, err = Int(get, Slurm, "rank", "BAD")
	if err == nil || err.Error() != `BAD="3x": not an integer` {
		t.Errorf("Int(BAD) error = %v", err)
	}
}

func TestLayerConflictError(t *testing.T) {
	err := &LayerConflictError{Inner: Torchrun, Outer: Hydra,
		InnerRank: Value{Var: "RANK", Raw: "0"}, InnerSize: Value{Var: "WORLD_SIZE", Raw: "1"},
		OuterRank: Value{Var: "PMI_RANK", Raw: "1"}, OuterSize: Value{Var: "PMI_SIZE", Raw: "2"}, Resolution: "unset RANK"}
	want := "RANK=0 WORLD_SIZE=1 (torchrun) disagree with PMI_RANK=1 PMI_SIZE=2 (hydra): unset RANK"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("Error() (-want +got):\n%s", diff)
	}
}

func TestRendezvousID(t *testing.T) {
	for _, tc := range []struct{ job, step, want string }{
		{"8907", "", "8907"},
		{"8907", "0", "8907"},
		{"8907", "1", "8907.1"},
		{"8907", "12", "8907.12"},
		{"", "3", ""},
	} {
		if got := RendezvousID(tc.job, tc.step); got != tc.want {
			t.Errorf("RendezvousID(%q, %q) = %q, want %q", tc.job, tc.step, got, tc.want)
		}
	}
	// Two steps of a job running at once get different ports.
	if PortForJob(RendezvousID("8907", "0")) == PortForJob(RendezvousID("8907", "1")) {
		t.Error("steps 0 and 1 of one job share a port")
	}
}

// batchkit env --format json: the same keys in the same order as the
// struct's tags, and the strings from the environment kept whole (issue
// 30, item 15: MASTER_ADDR=$'a\xffb' printed "a\ufffdb").
func TestTopologyJSON(t *testing.T) {
	top := Topology{Launcher: Slurm, Rank: 1, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2, NodeRank: 0, NumNodes: 2,
		Hosts: []string{"node1", "node2"}, MasterAddr: "node1", MasterPort: 15042, JobID: "42", StepID: "0"}
	type plain Topology // encoding/json's own, for valid UTF-8
	want, _ := json.Marshal(plain(top))
	got, err := json.Marshal(top)
	if err != nil || string(got) != string(want) {
		t.Errorf("Marshal = %s, %v\nwant        %s", got, err, want)
	}
	top.MasterAddr, top.JobID, top.Hosts = "a\xffb", "j\xfe", []string{"n\x80"}
	got, _ = json.Marshal(top)
	for _, s := range []string{`"hosts":["n\udc80"]`, `"master_addr":"a\udcffb"`, `"job_id":"j\udcfe"`} {
		if !strings.Contains(string(got), s) {
			t.Errorf("Marshal = %s: want %s in it", got, s)
		}
	}
}
