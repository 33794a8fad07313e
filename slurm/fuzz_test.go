package slurm

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// More seeds live in testdata/fuzz/<FuzzName>/.

func FuzzExpandHostlist(f *testing.F) {
	f.Add("node[1-3],gpu[08-10],rack[1-2]-n[01-02]")
	f.Fuzz(func(t *testing.T, expr string) {
		hosts, err := ExpandHostlist(expr)
		if err != nil {
			checkHostlistError(t, expr, err)
			if hosts != nil {
				t.Errorf("ExpandHostlist(%q) returned %d hosts with an error", expr, len(hosts))
			}
			return
		}
		if len(hosts) > maxHosts {
			t.Fatalf("ExpandHostlist(%q) returned %d hosts, limit is %d", expr, len(hosts), maxHosts)
		}
		for _, h := range hosts {
			if !validHostName(h) {
				t.Fatalf("ExpandHostlist(%q) returned invalid host name %q", expr, h)
			}
		}
		compressed := CompressHostlist(hosts)
		back, err := ExpandHostlist(compressed)
		if err != nil {
			t.Fatalf("ExpandHostlist(%q) = %q, which compresses to %q that does not expand: %v",
				expr, hosts, compressed, err)
		}
		if diff := cmp.Diff(hosts, back, cmpNilEmpty); diff != "" {
			t.Fatalf("ExpandHostlist(%q) compresses to %q, round trip mismatch (-want +got):\n%s",
				expr, compressed, diff)
		}
	})
}

func FuzzCompressHostlist(f *testing.F) {
	f.Add("n1,n2,n3,n1,n010,n011,n12,login")
	f.Fuzz(func(t *testing.T, list string) {
		var hosts []string
		for h := range strings.SplitSeq(list, ",") {
			if validHostName(h) {
				hosts = append(hosts, h)
			}
		}
		compressed := CompressHostlist(hosts)
		back, err := ExpandHostlist(compressed)
		if err != nil {
			t.Fatalf("CompressHostlist(%q) = %q, which does not expand: %v", hosts, compressed, err)
		}
		if diff := cmp.Diff(hosts, back, cmpNilEmpty); diff != "" {
			t.Fatalf("CompressHostlist(%q) = %q, round trip mismatch (-want +got):\n%s", hosts, compressed, diff)
		}
	})
}

func FuzzParseTasksPerNode(f *testing.F) {
	f.Add("2(x3),1")
	f.Fuzz(func(t *testing.T, s string) {
		counts, err := ParseTasksPerNode(s)
		if err != nil {
			var te *TasksPerNodeError
			if !errors.As(err, &te) {
				t.Fatalf("ParseTasksPerNode(%q) error %v is %T, want *TasksPerNodeError", s, err, err)
			}
			if te.Value != s {
				t.Errorf("TasksPerNodeError.Value = %q, want %q", te.Value, s)
			}
			checkOneLine(t, err)
			return
		}
		if len(counts) == 0 || len(counts) > maxHosts {
			t.Fatalf("ParseTasksPerNode(%q) returned %d counts", s, len(counts))
		}
		for _, c := range counts {
			if c < 0 || c > math.MaxInt32 {
				t.Fatalf("ParseTasksPerNode(%q) returned count %d", s, c)
			}
		}
		// Re-encode the way Slurm does and parse again.
		enc := encodeTasksPerNode(counts)
		back, err := ParseTasksPerNode(enc)
		if err != nil {
			t.Fatalf("ParseTasksPerNode(%q) = %v, re-encoded as %q: %v", s, counts, enc, err)
		}
		if diff := cmp.Diff(counts, back); diff != "" {
			t.Fatalf("re-encoded %q as %q, mismatch (-want +got):\n%s", s, enc, diff)
		}
	})
}

// encodeTasksPerNode is the inverse of ParseTasksPerNode, run-length
// encoding like Slurm's SLURM_TASKS_PER_NODE.
func encodeTasksPerNode(counts []int) string {
	var b strings.Builder
	for i := 0; i < len(counts); {
		j := i + 1
		for j < len(counts) && counts[j] == counts[i] {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j-i == 1 {
			fmt.Fprintf(&b, "%d", counts[i])
		} else {
			fmt.Fprintf(&b, "%d(x%d)", counts[i], j-i)
		}
		i = j
	}
	return b.String()
}

func TestEncodeTasksPerNode(t *testing.T) {
	if got := encodeTasksPerNode([]int{2, 2, 2, 1}); got != "2(x3),1" {
		t.Errorf("encodeTasksPerNode = %q, want %q", got, "2(x3),1")
	}
}

// validHostName reports whether h is a name ExpandHostlist can return.
func validHostName(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; isSep(c) || isControl(c) || c == '[' || c == ']' {
			return false
		}
	}
	return true
}

func checkHostlistError(t *testing.T, expr string, err error) {
	t.Helper()
	var he *HostlistError
	if !errors.As(err, &he) {
		t.Fatalf("ExpandHostlist(%q) error %v is %T, want *HostlistError", expr, err, err)
	}
	if he.Expr != expr {
		t.Errorf("HostlistError.Expr = %q, want %q", he.Expr, expr)
	}
	if he.Msg == "" {
		t.Errorf("HostlistError for %q has an empty Msg", expr)
	}
	checkOneLine(t, err)
}

func checkOneLine(t *testing.T, err error) {
	t.Helper()
	if s := err.Error(); strings.ContainsAny(s, "\n\r") {
		t.Errorf("Error() is not one line: %q", s)
	}
}
