package slurm

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// What srun exports as SLURM_DISTRIBUTION (seen on the local cluster) and
// what a user may set before srun: the node-level part.
func TestNodeDistribution(t *testing.T) {
	for raw, want := range map[string]string{
		"": "", "block": "block", "cyclic": "cyclic", "plane": "plane", "arbitrary": "arbitrary",
		"cyclic:cyclic": "cyclic", "block:block,pack": "block", "block:block": "block", "plane=4": "plane",
		"*": "block", "*:cyclic": "block", "Cyclic": "cyclic", "arbitrary,NoPack": "arbitrary",
	} {
		if got := NodeDistribution(raw); got != want {
			t.Errorf("NodeDistribution(%q) = %q, want %q", raw, got, want)
		}
	}
}

// Host files by slurm_read_hostfile's rules, and what srun would not run.
func TestParseHostfile(t *testing.T) {
	tests := []struct {
		name, content string
		n             int
		want          []Run
		err           string
	}{
		{"one a line", "node2\nnode1\n", 2, []Run{{"node2", 1}, {"node1", 1}}, ""},
		{"later lines are not read", "node2\nnode1\n!garbage\n", 2, []Run{{"node2", 1}, {"node1", 1}}, ""},
		{"a blank before a comment is part of the name", "# hosts\n\nnode2 # the first\nnode1\n", 2, nil, `line 3: "node2 " is not a host name`},
		{"a comment after the name", "node2# the first\n\nnode1#\n", 2, []Run{{"node2", 1}, {"node1", 1}}, ""},
		{"an escaped #", "no\\#de\n", 1, []Run{{"no#de", 1}}, ""},
		{"commas and repeats", "node2*2,node1\n", 3, []Run{{"node2", 2}, {"node1", 1}}, ""},
		{"a repeat cut at the task count", "node2*2000000000\n", 3, []Run{{"node2", 3}}, ""},
		{"no task count: all", "node2*2,node1\nnode3\n", 0, []Run{{"node2", 2}, {"node1", 1}, {"node3", 1}}, ""},
		{"no newline at the end", "node2", 1, []Run{{"node2", 1}}, ""},
		{"too few", "node2\n", 2, nil, "lists 1 hosts for 2 tasks"},
		{"empty", "", 2, nil, "lists no hosts"},
		{"only comments", "# x\n#y\n", 0, nil, "lists no hosts"},
		{"a line that starts with a blank", "node2\n node1\n", 2, nil, `line 2: " node1" does not start with a host name`},
		{"a CRLF file", "node2\r\nnode1\r\n", 2, nil, `line 1: "node2\r" is not a host name`},
		{"an empty item", "node2,,node1\n", 3, nil, `line 1: "" is not a host name`},
		{"*0", "node2*0\n", 1, nil, `"node2*0": the count after * is not an integer from 1 to 2^31-1`},
		{"*-1", "node2*-1\n", 1, nil, "the count after *"},
		{"* too large", "node2*2147483648\n", 1, nil, "the count after *"},
		{"a long garbage line is clipped", strings.Repeat("x ", 100), 1, nil, `..." is not a host name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHostfile("/hf", []byte(tt.content), tt.n)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, h.Runs); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHostfileHostAndShape(t *testing.T) {
	h, err := ParseHostfile("/hf", []byte("node2*2,node1\n"), 3)
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for i := range 4 {
		hosts = append(hosts, h.Host(i))
	}
	if diff := cmp.Diff([]string{"node2", "node2", "node1", ""}, hosts); diff != "" {
		t.Errorf("Host (-want +got):\n%s", diff)
	}
	s, err := h.Shape("SLURM_HOSTFILE", []string{"node1", "node2", "node3"})
	if err != nil {
		t.Fatal(err)
	}
	want := Shape{Var: "SLURM_HOSTFILE", Raw: "/hf", Counts: []int{1, 2}, Hosts: []string{"node1", "node2"}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Shape (-want +got):\n%s", diff)
	}
	if _, err := h.Shape("SLURM_HOSTFILE", []string{"node1"}); err == nil ||
		err.Error() != `SLURM_HOSTFILE="/hf": lists host "node2", which is not in the job's node list` {
		t.Errorf("a host outside the node list: %v", err)
	}
}
