package slurm

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/topology"
)

// NodeDistribution returns the node-level part of SLURM_DISTRIBUTION as srun
// exports it to a step's tasks: "cyclic" of "cyclic:block,pack", "plane" of
// "plane" (the size is in SLURM_DIST_PLANESIZE), "" when unset (srun's
// default, block). A user's own "plane=4" or "*" in the input is mapped the
// way srun reads them.
func NodeDistribution(raw string) string {
	node, _, _ := strings.Cut(raw, ",")
	node, _, _ = strings.Cut(node, ":")
	node, _, _ = strings.Cut(node, "=")
	node = strings.ToLower(node)
	if node == "*" {
		return "block"
	}
	return node
}

// Run is n consecutive tasks on Host: a host file's `host*n`, or one line.
type Run struct {
	Host string
	N    int
}

// Hostfile is what a SLURM_HOSTFILE says of a step's first tasks: task i
// runs on the i-th host it lists (srun -m arbitrary). It is kept as runs so
// that `node1*2000000000` costs one entry.
type Hostfile struct {
	Path string // the SLURM_HOSTFILE value, for errors
	Runs []Run
}

// HostfileError is a host file that does not say where the tasks run.
type HostfileError struct {
	Line int // 0: the file as a whole
	Msg  string
}

func (e *HostfileError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// ParseHostfile reads the hosts of the first n tasks (n < 1: all) from a host file's
// content by Slurm 22.05's rules (slurm_read_hostfile): '#' starts a
// comment unless escaped as `\#`, empty lines are skipped, a line starts
// with a letter or digit and lists hosts separated by commas, `host*N`
// repeats a host N times, and the file must name at least n hosts (later
// ones are ignored). Where Slurm would take garbage as a host name (blanks,
// control characters, `*0`), this is an error: srun could not have run
// the step on it.
func ParseHostfile(path string, content []byte, n int) (Hostfile, error) {
	h := Hostfile{Path: path}
	total := 0
	for i, line := range strings.Split(string(content), "\n") {
		line = stripComment(line)
		if line == "" {
			continue
		}
		if c := line[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return h, &HostfileError{Line: i + 1, Msg: fmt.Sprintf("%q does not start with a host name", clipText(line))}
		}
		for item := range strings.SplitSeq(line, ",") {
			run, err := parseRun(item)
			if err != nil {
				return h, &HostfileError{Line: i + 1, Msg: err.Error()}
			}
			if n > 0 {
				run.N = min(run.N, n-total)
			}
			h.Runs = append(h.Runs, run)
			total += run.N
			if n > 0 && total >= n {
				return h, nil
			}
		}
	}
	switch {
	case total == 0:
		return h, &HostfileError{Msg: "lists no hosts"}
	case n > 0:
		return h, &HostfileError{Msg: fmt.Sprintf("lists %d hosts for %d tasks", total, n)}
	}
	return h, nil
}

// stripComment cuts line at its first unescaped '#', unescaping `\#`.
func stripComment(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '#':
			b.WriteByte('#')
			i++
		case line[i] == '#':
			return b.String()
		default:
			b.WriteByte(line[i])
		}
	}
	return b.String()
}

// parseRun parses one item of a host file line: host or host*N.
func parseRun(item string) (Run, error) {
	host, count, repeated := strings.Cut(item, "*")
	run := Run{Host: host, N: 1}
	if repeated {
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 || n > math.MaxInt32 || strings.ContainsAny(count, "+-") {
			return run, fmt.Errorf("%q: the count after * is not an integer from 1 to 2^31-1", clipText(item))
		}
		run.N = n
	}
	if host == "" || strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return run, fmt.Errorf("%q is not a host name", clipText(item))
	}
	return run, nil
}

// clipText shortens what an error quotes from a file to one readable piece.
func clipText(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Host returns the host of task i, which ParseHostfile has read.
func (h Hostfile) Host(i int) string {
	for _, r := range h.Runs {
		if i < r.N {
			return r.Host
		}
		i -= r.N
	}
	return ""
}

// Shape is the shape of the step the host file lays out on hosts (the
// node list, in whose order Slurm numbers the nodes): the hosts that hold
// a task, in that order, and the tasks on each. A task on a host outside
// the list is an error.
func (h Hostfile) Shape(name string, hosts []string) (Shape, error) {
	counts := make([]int, len(hosts))
	for _, r := range h.Runs {
		i := slices.Index(hosts, r.Host)
		if i < 0 {
			return Shape{}, &topology.VarError{Var: name, Value: h.Path,
				Msg: fmt.Sprintf("lists host %q, which is not in the job's node list", clipText(r.Host))}
		}
		counts[i] += r.N
	}
	s := Shape{Var: name, Raw: h.Path}
	for i, c := range counts {
		if c > 0 {
			s.Counts, s.Hosts = append(s.Counts, c), append(s.Hosts, hosts[i])
		}
	}
	return s, nil
}
