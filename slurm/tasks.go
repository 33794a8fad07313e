package slurm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// TasksPerNodeError reports a SLURM_TASKS_PER_NODE value that cannot be
// parsed.
type TasksPerNodeError struct {
	Value string // the whole value as given
	Msg   string // what is wrong with it
}

func (e *TasksPerNodeError) Error() string {
	return fmt.Sprintf("invalid tasks-per-node %q: %s", e.Value, e.Msg)
}

// ParseTasksPerNode parses SLURM_TASKS_PER_NODE or
// SLURM_STEP_TASKS_PER_NODE, such as "2(x3),1", into one task count per
// node in node-list order: [2 2 2 1].
//
// Each comma-separated item is a count, optionally followed by "(xN)" to
// repeat it on N consecutive nodes. Counts may be 0 but not negative;
// repeats must be at least 1. Whitespace, empty items, values above
// 2^31-1 and lists longer than 1<<20 nodes are errors, and so is the empty
// string, since a job always has at least one node.
func ParseTasksPerNode(s string) ([]int, error) {
	fail := func(format string, args ...any) ([]int, error) {
		return nil, &TasksPerNodeError{Value: s, Msg: fmt.Sprintf(format, args...)}
	}
	if s == "" {
		return fail("empty")
	}
	var out []int
	for item := range strings.SplitSeq(s, ",") {
		if item == "" {
			return fail("empty item")
		}
		countText, rest, repeated := strings.Cut(item, "(")
		count, msg := parseCount(countText, "task count", item)
		if msg != "" {
			return fail("%s", msg)
		}
		repeat := 1
		if repeated {
			repText, ok := strings.CutPrefix(rest, "x")
			if ok {
				repText, ok = strings.CutSuffix(repText, ")")
			}
			if !ok {
				return fail("item %q is not of the form N or N(xM)", item)
			}
			if repeat, msg = parseCount(repText, "repeat count", item); msg != "" {
				return fail("%s", msg)
			}
			if repeat == 0 {
				return fail("repeat count in %q is 0", item)
			}
		}
		if repeat > maxHosts-len(out) {
			return fail("more than %d nodes", maxHosts)
		}
		for range repeat {
			out = append(out, count)
		}
	}
	return out, nil
}

// parseCount parses a non-negative decimal of at most 2^31-1, digits only.
func parseCount(text, what, item string) (int, string) {
	if text == "" {
		return 0, fmt.Sprintf("missing %s in %q", what, item)
	}
	for i := 0; i < len(text); i++ {
		if text[i] < '0' || text[i] > '9' {
			return 0, fmt.Sprintf("%s %q in %q is not a non-negative integer", what, text, item)
		}
	}
	v, err := strconv.ParseUint(text, 10, 31)
	if err != nil || v > math.MaxInt32 {
		return 0, fmt.Sprintf("%s %s in %q is too large", what, text, item)
	}
	return int(v), ""
}
