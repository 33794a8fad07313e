package slurm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want []string
	}{
		{"empty", "", nil},
		{"only separators", " ,\t, ,,", nil},
		{"plain name", "login", []string{"login"}},
		{"plain names", "a,b,c", []string{"a", "b", "c"}},
		{"plain name with digits", "node007", []string{"node007"}},
		{"range", "node[1-3]", []string{"node1", "node2", "node3"}},
		{"single value", "node[5]", []string{"node5"}},
		{"zero padding", "node[001-003]", []string{"node001", "node002", "node003"}},
		{"padding across decades", "n[08-10]", []string{"n08", "n09", "n10"}},
		{"width comes from low bound", "n[8-010]", []string{"n8", "n9", "n10"}},
		{"high bound padding ignored", "n[1-01]", []string{"n1"}},
		{"padded zero", "n[00-02]", []string{"n00", "n01", "n02"}},
		{"list in brackets", "n[1,3,5-7]", []string{"n1", "n3", "n5", "n6", "n7"}},
		{"list with mixed padding", "n[1,02,003-004]", []string{"n1", "n02", "n003", "n004"}},
		{"top level groups", "node[1-3],gpu[08-10]", []string{
			"node1", "node2", "node3", "gpu08", "gpu09", "gpu10"}},
		{"brief example", "node[1-3],gpu[08-10],rack[1-2]-n[01-02]", []string{
			"node1", "node2", "node3", "gpu08", "gpu09", "gpu10",
			"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}},
		{"two groups", "rack[1-2]-node[01-02]", []string{
			"rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"}},
		{"two adjacent groups", "a[1-2][3-4]", []string{"a13", "a14", "a23", "a24"}},
		// Slurm varies the last group fastest, then the first, then the
		// second: checked against scontrol 22.05.
		{"three groups, Slurm order", "a[1-2]b[3-4]c[5-6]", []string{
			"a1b3c5", "a1b3c6", "a2b3c5", "a2b3c6",
			"a1b4c5", "a1b4c6", "a2b4c5", "a2b4c6"}},
		{"four groups, Slurm order", "a[1-2]b[3-4]c[5-6]d[7-8]", []string{
			"a1b3c5d7", "a1b3c5d8", "a2b3c5d7", "a2b3c5d8",
			"a1b4c5d7", "a1b4c5d8", "a2b4c5d7", "a2b4c5d8",
			"a1b3c6d7", "a1b3c6d8", "a2b3c6d7", "a2b3c6d8",
			"a1b4c6d7", "a1b4c6d8", "a2b4c6d7", "a2b4c6d8"}},
		{"group without prefix", "[1-3]", []string{"1", "2", "3"}},
		{"prefix ending in digits", "n1[2-3]", []string{"n12", "n13"}},
		{"duplicates kept in order", "n2,n1,n[1-2],n1", []string{"n2", "n1", "n1", "n2", "n1"}},
		{"overlapping ranges kept", "n[1-3,2-4]", []string{"n1", "n2", "n3", "n2", "n3", "n4"}},
		{"space separated", "n1 n2", []string{"n1", "n2"}},
		{"tab separated", "n[1-2]\tm", []string{"n1", "n2", "m"}},
		{"surrounding whitespace", "  n1 , n2\t", []string{"n1", "n2"}},
		{"separator runs", ",,n1,, ,n2,", []string{"n1", "n2"}},
		{"punctuation in names", "node-1.ib,x_y[1-2]", []string{"node-1.ib", "x_y1", "x_y2"}},
		{"non-ASCII name", "nœud[1-2]", []string{"nœud1", "nœud2"}},
		{"largest numbers", "n[18446744073709551614-18446744073709551615]", []string{
			"n18446744073709551614", "n18446744073709551615"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExpandHostlist(tt.expr)
			if err != nil {
				t.Fatalf("ExpandHostlist(%q): %v", tt.expr, err)
			}
			if diff := cmp.Diff(tt.want, got, cmpNilEmpty); diff != "" {
				t.Errorf("ExpandHostlist(%q) mismatch (-want +got):\n%s", tt.expr, diff)
			}
		})
	}
}

// cmpNilEmpty treats nil and empty slices alike.
var cmpNilEmpty = cmpopts.EquateEmpty()

func TestExpandHostlistLimits(t *testing.T) {
	tests := []struct {
		name  string
		expr  string
		count int
	}{
		{"one full Slurm range", "n[0-65535]", 65536},
		{"full prefix group", "a[0-65535]b[1]", 65536},
		{"prefix group of several ranges", "a[0-50000,0-15534]b[1]", 65536},
		{"exactly maxHosts", "a[0-15]b[0-65535]", maxHosts},
		{"maxHosts over several names", "a[0-65535],b[0-65535],c[0-65535],d[0-65535],e[0-65535],f[0-65535],g[0-65535],h[0-65535],i[0-65535],j[0-65535],k[0-65535],l[0-65535],m[0-65535],n[0-65535],o[0-65535],p[0-65535]", maxHosts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExpandHostlist(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.count {
				t.Errorf("got %d hosts, want %d", len(got), tt.count)
			}
		})
	}
}

func TestExpandHostlistErrors(t *testing.T) {
	tests := []struct {
		name string
		expr string
		msg  string // HostlistError.Msg
	}{
		{"reversed range", "node[3-1]", "reversed range 3-1"},
		{"letters in range", "n[a-b]", `non-numeric range "a-b"`},
		{"letter in list", "n[1,x]", `non-numeric range "x"`},
		{"box syntax", "n[1x2]", `non-numeric range "1x2"`},
		{"missing high bound", "n[1-]", `range "1-" is missing a number`},
		{"negative", "n[-1]", `range "-1" is missing a number`},
		{"plus sign", "n[+1]", `non-numeric range "+1"`},
		{"double dash", "n[1-2-3]", `non-numeric range "1-2-3"`},
		{"empty brackets", "n[]", "empty brackets []"},
		{"empty item", "n[1,,2]", "empty item in [1,,2]"},
		{"leading comma", "n[,1]", "empty item in [,1]"},
		{"trailing comma", "n[1,]", "empty item in [1,]"},
		{"unclosed bracket", "n[1-2", "'[' at offset 1 is never closed"},
		{"unclosed second bracket", "a[1]b[2", "'[' at offset 5 is never closed"},
		{"lone open bracket", "[", "'[' at offset 0 is never closed"},
		{"stray close bracket", "n1-2]", "']' at offset 4 has no matching '['"},
		{"double close bracket", "n[1-2]]", "']' at offset 6 has no matching '['"},
		{"nested brackets", "n[[1-2]]", "nested '[' at offset 2"},
		{"nested inside list", "a[1[2]]", "nested '[' at offset 3"},
		{"whitespace in brackets", "n[1, 2]", "whitespace inside brackets at offset 4"},
		{"tab in brackets", "n[1,\t2]", "whitespace inside brackets at offset 4"},
		{"suffix after last group", "n[1-2]x", `text "x" follows the last bracket group of "n[1-2]x" (Slurm allows text only between groups)`},
		{"domain suffix", "n[1-2].ib", `text ".ib" follows the last bracket group of "n[1-2].ib" (Slurm allows text only between groups)`},
		{"suffix after several groups", "n[1-3]x[1-2]y", `text "y" follows the last bracket group of "n[1-3]x[1-2]y" (Slurm allows text only between groups)`},
		{"newline", "n1\nn2", `control character '\n' at offset 2`},
		{"trailing newline", "n[1-2]\n", `control character '\n' at offset 6`},
		{"carriage return", "n1\r", `control character '\r' at offset 2`},
		{"NUL", "n\x001", `control character '\x00' at offset 1`},
		{"control char in brackets", "n[1\x7f]", `control character '\x7f' at offset 3`},
		{"number overflow", "n[18446744073709551616]", `number 18446744073709551616 in "18446744073709551616" is too large`},
		{"range too large for Slurm", "n[0-65536]", "range 0-65536 has more than 65536 hosts"},
		{"fuzz-sized range", "n[0-999999999]", "range 0-999999999 has more than 65536 hosts"},
		{"full uint64 range", "n[0-18446744073709551615]", "range 0-18446744073709551615 has more than 65536 hosts"},
		{"prefix group too large", "a[0-65535,0]b[1]", `bracket group 1 of "a[0-65535,0]b[1]" has 65537 hosts, Slurm allows at most 65536 in a group that is not the last`},
		{"product too large", "a[0-65535]b[0-65535]", "expands to more than 1048576 hosts"},
		{"product just too large", "a[0-15]b[0-65535],c", "expands to more than 1048576 hosts"},
		{"sum too large", strings.Repeat("n[0-65535],", 17), "expands to more than 1048576 hosts"},
		{"too many bytes", strings.Repeat("x", 200) + "[0-65535]," + strings.Repeat("y", 2000) + "[0-65535]", "expands to more than 134217728 bytes of host names"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExpandHostlist(tt.expr)
			if err == nil {
				t.Fatalf("ExpandHostlist(%q) = %d hosts, want error %q", tt.expr, len(got), tt.msg)
			}
			var he *HostlistError
			if !errors.As(err, &he) {
				t.Fatalf("error %v is %T, want *HostlistError", err, err)
			}
			want := &HostlistError{Expr: tt.expr, Msg: tt.msg}
			if diff := cmp.Diff(want, he); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
			if s := err.Error(); strings.ContainsAny(s, "\n\r") {
				t.Errorf("Error() is not one line: %q", s)
			}
		})
	}
}

func TestHostlistErrorMessage(t *testing.T) {
	_, err := ExpandHostlist("node[3-1]")
	if diff := cmp.Diff(`invalid hostlist "node[3-1]": reversed range 3-1`, fmt.Sprint(err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCompressHostlist(t *testing.T) {
	seq := func(prefix string, from, to int) []string {
		var out []string
		for i := from; i <= to; i++ {
			out = append(out, fmt.Sprintf("%s%d", prefix, i))
		}
		return out
	}
	tests := []struct {
		name  string
		hosts []string
		want  string
	}{
		{"nil", nil, ""},
		{"one plain", []string{"login"}, "login"},
		{"one numbered", []string{"n05"}, "n05"},
		{"range", []string{"n1", "n2", "n3"}, "n[1-3]"},
		{"padding", []string{"n08", "n09", "n10"}, "n[08-10]"},
		{"width grows past padding", []string{"n8", "n9", "n10"}, "n[8-10]"},
		{"incompatible padding", []string{"n9", "n010"}, "n[9,010]"},
		{"mixed widths", []string{"n1", "n02"}, "n[1,02]"},
		{"padding change mid run", []string{"n010", "n011", "n12", "n013"}, "n[010-011,12,013]"},
		{"gaps", []string{"n1", "n3", "n5", "n6", "n7"}, "n[1,3,5-7]"},
		{"unsorted keeps order", []string{"n3", "n1", "n2"}, "n[3,1-2]"},
		{"duplicates kept", []string{"n1", "n2", "n1"}, "n[1-2,1]"},
		{"same host twice", []string{"n1", "n1"}, "n[1,1]"},
		{"prefix change", []string{"n1", "m1", "n2"}, "n1,m1,n2"},
		{"plain names between", []string{"a", "b", "a1", "a2", "a"}, "a,b,a[1-2],a"},
		{"digits only", []string{"1", "2", "3"}, "[1-3]"},
		{"no numeric suffix", []string{"n1x", "n2x"}, "n1x,n2x"},
		{"several prefixes", []string{"node1", "node2", "node3", "gpu08", "gpu09", "gpu10"}, "node[1-3],gpu[08-10]"},
		{"two level names", []string{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}, "rack1-n[01-02],rack2-n[01-02]"},
		{"no wrap at uint64 max", []string{"n18446744073709551615", "n0"}, "n[18446744073709551615,0]"},
		{"suffix beyond uint64 is plain", []string{"n99999999999999999999", "n100000000000000000000"}, "n99999999999999999999,n100000000000000000000"},
		{"range split at Slurm limit", seq("n", 0, 65536), "n[0-65535,65536]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CompressHostlist(tt.hosts)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CompressHostlist mismatch (-want +got):\n%s", diff)
			}
			back, err := ExpandHostlist(got)
			if err != nil {
				t.Fatalf("ExpandHostlist(%q): %v", got, err)
			}
			if diff := cmp.Diff(tt.hosts, back, cmpNilEmpty); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompressHostlistSplitsLongBrackets(t *testing.T) {
	// Every other number, so each is its own item in one bracket group.
	hosts := make([]string, maxBracketItems+2)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("n%d", 2*i)
	}
	got := CompressHostlist(hosts)
	if n := strings.Count(got, "["); n != 2 {
		t.Errorf("got %d bracket groups, want 2", n)
	}
	back, err := ExpandHostlist(got)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hosts, back); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
}

// TestCompressRoundTripRandom checks the round trip on many lists built to
// hit the awkward cases: mixed zero padding, runs crossing a power of ten,
// duplicates, shuffles and prefixes that end in digits.
func TestCompressRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		hosts := randomHosts(r)
		got := CompressHostlist(hosts)
		back, err := ExpandHostlist(got)
		if err != nil {
			t.Fatalf("case %d: hosts %q compress to %q: %v", i, hosts, got, err)
		}
		if diff := cmp.Diff(hosts, back, cmpNilEmpty); diff != "" {
			t.Fatalf("case %d: %q compressed to %q, round trip mismatch (-want +got):\n%s", i, hosts, got, diff)
		}
	}
}

// randomHosts returns a list of valid host names with a bias towards long
// ascending runs so that ranges form.
func randomHosts(r *rand.Rand) []string {
	prefixes := []string{"n", "node", "gpu-", "r1n", "a.b", "", "x_"}
	var hosts []string
	for range 1 + r.IntN(6) {
		prefix := prefixes[r.IntN(len(prefixes))]
		start := r.IntN(1200)
		if r.IntN(8) == 0 {
			start = r.IntN(5) // around zero
		}
		width := 0
		if r.IntN(2) == 0 {
			width = 1 + r.IntN(5)
		}
		n := 1 + r.IntN(15)
		for j := range n {
			v := start + j
			if r.IntN(6) == 0 {
				v += r.IntN(3) - 1 // gap or duplicate
			}
			if v < 0 {
				v = 0
			}
			w := width
			if r.IntN(10) == 0 {
				w = r.IntN(5) // padding changes mid run
			}
			hosts = append(hosts, fmt.Sprintf("%s%0*d", prefix, w, v))
		}
		if r.IntN(5) == 0 {
			hosts = append(hosts, prefix+"login")
		}
	}
	if r.IntN(4) == 0 {
		r.Shuffle(len(hosts), func(i, j int) { hosts[i], hosts[j] = hosts[j], hosts[i] })
	}
	// A name of only a prefix would not be valid ("" is not a host).
	out := hosts[:0]
	for _, h := range hosts {
		if h != "" {
			out = append(out, h)
		}
	}
	return out
}
