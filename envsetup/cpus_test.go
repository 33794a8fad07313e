package envsetup

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadCPUs(t *testing.T) {
	ht := CPUSet{Online: 16}
	for id := range 16 {
		p := id % 8
		ht.Allowed = append(ht.Allowed, CPU{ID: id, Core: p % 4, Socket: p / 4})
	}
	for _, tc := range []struct {
		tree string
		want CPUSet
	}{
		{"ht-2s-8c", ht},
		{"bound-8c", CPUSet{Online: 8, Allowed: []CPU{{ID: 2, Core: 2}, {ID: 3, Core: 3}}}},
		// No topology files: each CPU is a core of its own.
		{"notopo-4", CPUSet{Online: 4, Allowed: []CPU{{ID: 0}, {ID: 1, Core: 1}, {ID: 2, Core: 2}, {ID: 3, Core: 3}}}},
	} {
		t.Run(tc.tree, func(t *testing.T) {
			got, err := ReadCPUs(filepath.Join("testdata/sys", tc.tree))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestReadCPUsErrors(t *testing.T) {
	_, err := ReadCPUs("testdata/sys/missing")
	if err == nil || !strings.Contains(err.Error(), "reading the affinity mask") {
		t.Errorf("err = %v, want a failure to read the affinity mask", err)
	}
}

// The real machine: whatever it has, the mask is non-empty and within the
// online CPUs.
func TestReadCPUsHost(t *testing.T) {
	got, err := ReadCPUs("/")
	if err != nil {
		t.Skip(err)
	}
	if len(got.Allowed) == 0 || len(got.Allowed) > got.Online {
		t.Errorf("ReadCPUs(/) = %+v", got)
	}
}

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{"0", []int{0}, false},
		{"0-3", []int{0, 1, 2, 3}, false},
		{"0-1,8,10-11", []int{0, 1, 8, 10, 11}, false},
		{"3,1,1-2", []int{1, 2, 3}, false},
		{"", []int{}, false},
		{"x", nil, true},
		{"3-1", nil, true},
		{"-1", nil, true},
	} {
		got, err := ParseCPUList(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("ParseCPUList(%q) err = %v, want bad=%v", tc.in, err, tc.bad)
			continue
		}
		if d := cmp.Diff(tc.want, got); !tc.bad && d != "" {
			t.Errorf("ParseCPUList(%q) (-want +got):\n%s", tc.in, d)
		}
	}
}

func TestHexMask(t *testing.T) {
	for _, tc := range []struct {
		ids  []int
		want string
	}{
		{[]int{0}, "1"},
		{[]int{1, 2, 3, 4}, "1E"}, // Intel's own example domain, 0001E
		{[]int{0, 8}, "101"},
		{[]int{127}, "80000000000000000000000000000000"},
	} {
		if got := hexMask(tc.ids); got != tc.want {
			t.Errorf("hexMask(%v) = %s, want %s", tc.ids, got, tc.want)
		}
	}
}
