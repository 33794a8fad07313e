package slurm

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTasksPerNode(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []int
	}{
		{"brief example", "2(x3),1", []int{2, 2, 2, 1}},
		{"single", "4", []int{4}},
		{"list", "1,2,3", []int{1, 2, 3}},
		{"repeat of one", "8(x1)", []int{8}},
		{"several repeats", "16(x2),8(x1),4(x3)", []int{16, 16, 8, 4, 4, 4}},
		{"zero tasks", "0,1", []int{0, 1}},
		{"leading zeros", "02(x02)", []int{2, 2}},
		{"largest count", "2147483647", []int{2147483647}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTasksPerNode(tt.in)
			if err != nil {
				t.Fatalf("ParseTasksPerNode(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseTasksPerNode(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseTasksPerNodeLimit(t *testing.T) {
	got, err := ParseTasksPerNode("1(x1048575),3")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != maxHosts || got[len(got)-1] != 3 {
		t.Errorf("got %d counts ending in %d, want %d ending in 3", len(got), got[len(got)-1], maxHosts)
	}
}

func TestParseTasksPerNodeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		msg  string // TasksPerNodeError.Msg
	}{
		{"empty", "", "empty"},
		{"zero repeat", "2(x0),1", `repeat count in "2(x0)" is 0`},
		{"negative count", "-1", `task count "-1" in "-1" is not a non-negative integer`},
		{"negative repeat", "2(x-1)", `repeat count "-1" in "2(x-1)" is not a non-negative integer`},
		{"plus sign", "+2", `task count "+2" in "+2" is not a non-negative integer`},
		{"letters", "abc", `task count "abc" in "abc" is not a non-negative integer`},
		{"missing parens", "2x3", `task count "2x3" in "2x3" is not a non-negative integer`},
		{"unclosed paren", "2(x3", `item "2(x3" is not of the form N or N(xM)`},
		{"missing x", "2(3)", `item "2(3)" is not of the form N or N(xM)`},
		{"empty repeat", "2(x)", `missing repeat count in "2(x)"`},
		{"missing count", "(x3)", `missing task count in "(x3)"`},
		{"double repeat", "2(x3)(x4)", `repeat count "3)(x4" in "2(x3)(x4)" is not a non-negative integer`},
		{"text after repeat", "2(x3)1", `item "2(x3)1" is not of the form N or N(xM)`},
		{"empty item", "2,,1", "empty item"},
		{"trailing comma", "2,", "empty item"},
		{"leading space", " 2", `task count " 2" in " 2" is not a non-negative integer`},
		{"count overflow", "2147483648", `task count 2147483648 in "2147483648" is too large`},
		{"huge count", "99999999999999999999999", `task count 99999999999999999999999 in "99999999999999999999999" is too large`},
		{"repeat overflow", "1(x99999999999)", `repeat count 99999999999 in "1(x99999999999)" is too large`},
		{"too many nodes", "1(x1048576),1", "more than 1048576 nodes"},
		{"newline", "2\n", `task count "2\n" in "2\n" is not a non-negative integer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTasksPerNode(tt.in)
			if err == nil {
				t.Fatalf("ParseTasksPerNode(%q) = %v, want error %q", tt.in, got, tt.msg)
			}
			var te *TasksPerNodeError
			if !errors.As(err, &te) {
				t.Fatalf("error %v is %T, want *TasksPerNodeError", err, err)
			}
			if diff := cmp.Diff(&TasksPerNodeError{Value: tt.in, Msg: tt.msg}, te); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
			if s := err.Error(); strings.ContainsAny(s, "\n\r") || !strings.HasPrefix(s, "invalid tasks-per-node ") {
				t.Errorf("Error() = %q, want one line starting with %q", s, "invalid tasks-per-node ")
			}
		})
	}
}
