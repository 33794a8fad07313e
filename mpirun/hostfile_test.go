package mpirun

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHostfileFormat(t *testing.T) {
	hosts := []Host{{Name: "node1", Slots: 2}, {Name: "node2"}, {Name: "10.0.0.3", Slots: 16}}
	want := map[Flavor]string{
		OpenMPI:  "node1 slots=2\nnode2\n10.0.0.3 slots=16\n",
		MPICH:    "node1:2\nnode2\n10.0.0.3:16\n",
		IntelMPI: "node1:2\nnode2\n10.0.0.3:16\n",
		MVAPICH:  "node1:2\nnode2\n10.0.0.3:16\n",
	}
	for _, f := range Flavors {
		if got := Hostfile(f, hosts); got != want[f] {
			t.Errorf("Hostfile(%s) = %q, want %q", f, got, want[f])
		}
	}
	if got := Hostfile("lam", hosts); got != "" {
		t.Errorf("Hostfile of an unknown flavor = %q, want empty", got)
	}
	if got := Hostfile(OpenMPI, nil); got != "" {
		t.Errorf("Hostfile without hosts = %q, want empty", got)
	}
}

func TestParseHostfile(t *testing.T) {
	tests := []struct {
		name, text string
		want       []Host
	}{
		{"open mpi", "node1 slots=2\nnode2 slots=4 max_slots=8\n", []Host{{"node1", 2}, {"node2", 4}}},
		{"open mpi max only", "node1 max_slots=8\nnode2 max-slots=2 slots=2\n", []Host{{"node1", 0}, {"node2", 2}}},
		{"hydra", "node1:2\nnode2:4\n", []Host{{"node1", 2}, {"node2", 4}}},
		{"plain", "node1\nnode2\nnode2\n", []Host{{"node1", 0}, {"node2", 0}, {"node2", 0}}},
		{"mixed", "a slots=1\nb:2\nc\n", []Host{{"a", 1}, {"b", 2}, {"c", 0}}},
		{"comments and blanks", "# cluster A\n\n  node1:2   # first\n\t\n#node9:4\nnode2 slots=2#x\n\n", []Host{{"node1", 2}, {"node2", 2}}},
		{"crlf and no final newline", "node1:2\r\nnode2:2", []Host{{"node1", 2}, {"node2", 2}}},
		{"ip and fqdn", "10.1.2.3:8\ngpu-01.cluster.example_x slots=8\n", []Host{{"10.1.2.3", 8}, {"gpu-01.cluster.example_x", 8}}},
		{"leading zero slots", "a:02\n", []Host{{"a", 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHostfile(tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseHostfile (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseHostfileErrors(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"empty", "", "hostfile lists no hosts"},
		{"only comments", "# nothing\n\n   # here\n", "hostfile lists no hosts"},
		{"zero slots", "a\nb:0\n", `hostfile line 2: host b: slot count "0": want an integer from 1 to 1048576`},
		{"negative slots", "a slots=-1\n", `hostfile line 1: slots: slot count "-1"`},
		{"plus slots", "a:+2\n", `hostfile line 1: host a: slot count "+2"`},
		{"huge slots", "\n\n\na slots=99999999999999999999\n", "hostfile line 4: slots: slot count"},
		{"word slots", "a:two\n", `line 1: host a: slot count "two"`},
		{"empty colon", "a:\n", `line 1: host a: slot count ""`},
		{"empty host", ":2\n", "line 1: empty host name"},
		{"bad char", "ok\nno/de:2\n", `hostfile line 2: host name "no/de": invalid character '/'`},
		{"dash", "-np:2\n", `hostfile line 1: host name "-np" starts with '-'`},
		{"two colons", "a:2:3\n", `line 1: host a: slot count "2:3"`},
		{"stray word", "a\nb c\n", `hostfile line 2: unexpected "c" after host b: want slots=N or max_slots=N`},
		{"unknown key", "a slot=2\n", `hostfile line 1: unknown field "slot" for host a`},
		{"colon and slots", "a:2 slots=2\n", `hostfile line 1: "slots=2": host a already has slots in host:N form`},
		{"slots twice", "a slots=2 slots=3\n", "hostfile line 1: slots given twice for host a"},
		{"max twice", "a max_slots=2 max-slots=3\n", "max_slots given twice"},
		{"over max", "a slots=4 max_slots=2\n", "hostfile line 1: host a: slots=4 exceeds max_slots=2"},
		{"empty value", "a slots=\n", `slots: slot count ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHostfile(tt.text)
			if err == nil {
				t.Fatalf("ParseHostfile = %v, want error %q", got, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
			if got != nil {
				t.Errorf("hosts %v returned with an error", got)
			}
		})
	}
}

// Each flavor's hostfile parses back to the same hosts.
func TestHostfileRoundTrip(t *testing.T) {
	cases := [][]Host{
		{{"node1", 2}, {"node2", 2}},
		{{"a", 0}},
		{{"a", 1}, {"b", 0}, {"a", 3}, {"10.0.0.1", 1048576}},
	}
	for _, hosts := range cases {
		for _, f := range Flavors {
			text := Hostfile(f, hosts)
			got, err := ParseHostfile(text)
			if err != nil {
				t.Fatalf("%s: ParseHostfile(%q): %v", f, text, err)
			}
			if diff := cmp.Diff(hosts, got); diff != "" {
				t.Errorf("%s round trip of %q (-want +got):\n%s", f, text, diff)
			}
		}
	}
}

func TestParseHosts(t *testing.T) {
	got, err := ParseHosts("node1:2, node2,10.0.0.1:4")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Host{{"node1", 2}, {"node2", 0}, {"10.0.0.1", 4}}, got); diff != "" {
		t.Errorf("ParseHosts (-want +got):\n%s", diff)
	}
	for in, want := range map[string]string{
		"":         "empty entry",
		"a,,b":     "empty entry",
		"a,":       "empty entry",
		"a:0":      `slot count "0"`,
		"a b":      "invalid character",
		"-x":       "starts with '-'",
		"a:2:2":    `slot count "2:2"`,
		"a;touch":  "invalid character ';'",
		"n[1-":     "n[1-",
		"n[1-2]x":  "n[1-2]x",
		"n[2-1]":   "n[2-1]",
		"n[1, 2]":  "blank inside a hostlist expression",
		"n[1-2]:0": `host n[1-2]: slot count "0"`,
		"n[a-b]":   "n[a-b]",
		"-n[1-2]":  "starts with '-'",
		"x;n[1-2]": "invalid character ';'",
		"n[1:2]":   "n[1",
	} {
		hosts, err := ParseHosts(in)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseHosts(%q) error %v, want one line containing %q", in, err, want)
		}
		if hosts != nil {
			t.Errorf("ParseHosts(%q) = %v with an error", in, hosts)
		}
	}
}

// --hosts takes Slurm hostlist expressions: commas inside brackets do not
// split the list, and a :N suffix gives every host of its entry N slots.
func TestParseHostsHostlist(t *testing.T) {
	tests := []struct {
		in   string
		want []Host
	}{
		{"node[1-2]", []Host{{"node1", 0}, {"node2", 0}}},
		{"node[1,2]", []Host{{"node1", 0}, {"node2", 0}}},
		{"node[1-2]:2", []Host{{"node1", 2}, {"node2", 2}}},
		{"gpu[01,03-04]:4,login1", []Host{{"gpu01", 4}, {"gpu03", 4}, {"gpu04", 4}, {"login1", 0}}},
		{"a:1, r[1-2]-n[1-2] ,b", []Host{{"a", 1}, {"r1-n1", 0}, {"r1-n2", 0}, {"r2-n1", 0}, {"r2-n2", 0}, {"b", 0}}},
		{"10.0.0.[1-2]:3", []Host{{"10.0.0.1", 3}, {"10.0.0.2", 3}}},
	}
	for _, tt := range tests {
		got, err := ParseHosts(tt.in)
		if err != nil {
			t.Errorf("ParseHosts(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseHosts(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// More seeds live in testdata/fuzz/FuzzParseHostfile/.
func FuzzParseHostfile(f *testing.F) {
	f.Add("node1 slots=2\nnode2:2\nnode3 # c\n")
	f.Fuzz(func(t *testing.T, text string) {
		hosts, err := ParseHostfile(text)
		if err != nil {
			if hosts != nil {
				t.Fatalf("hosts %v with error %v", hosts, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			if !strings.HasPrefix(err.Error(), "hostfile line ") && err.Error() != "hostfile lists no hosts" {
				t.Fatalf("error does not name a line: %q", err)
			}
			return
		}
		if len(hosts) == 0 {
			t.Fatal("no hosts and no error")
		}
		for _, h := range hosts {
			if checkHostName(h.Name) != nil || h.Slots < 0 || h.Slots > maxSlots {
				t.Fatalf("invalid host %+v from %q", h, text)
			}
		}
		// Whatever parses renders in every flavor's format and parses
		// back to the same hosts, and is usable on a command line.
		for _, fl := range Flavors {
			back, err := ParseHostfile(Hostfile(fl, hosts))
			if err != nil {
				t.Fatalf("%s: rendering of %v does not parse: %v", fl, hosts, err)
			}
			if diff := cmp.Diff(hosts, back); diff != "" {
				t.Fatalf("%s round trip (-want +got):\n%s", fl, diff)
			}
		}
		if _, err := Command(Spec{Flavor: OpenMPI, NP: 1, Hosts: hosts, Program: []string{"x"}}); err != nil {
			t.Fatalf("Command with parsed hosts: %v", err)
		}
	})
}

func TestNodesUsed(t *testing.T) {
	hosts := func(slots ...int) []Host {
		var hs []Host
		for i, s := range slots {
			hs = append(hs, Host{Name: fmt.Sprintf("n%d", i+1), Slots: s})
		}
		return hs
	}
	for _, tc := range []struct {
		name  string
		hosts []Host
		np    int
		ppn   int
		want  int
	}{
		{"ppn fills nodes", hosts(0, 0, 0), 6, 2, 3},
		{"ppn, short last node", hosts(0, 0), 3, 2, 2},
		{"ppn, fewer ranks than hosts", hosts(0, 0, 0), 2, 2, 1},
		{"ppn, more ranks than hosts hold (oversubscribed)", hosts(0, 0), 9, 2, 2},
		{"slots", hosts(2, 1), 3, 0, 2},
		{"slots, first host enough", hosts(4, 4), 3, 0, 1},
		{"slots run out", hosts(1, 1), 3, 0, 0},
		{"no slots, no ppn: the launcher decides", hosts(0, 0), 2, 0, 0},
		{"no hosts", nil, 4, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodesUsed(tc.hosts, tc.np, tc.ppn); got != tc.want {
				t.Errorf("NodesUsed = %d, want %d", got, tc.want)
			}
		})
	}
}
