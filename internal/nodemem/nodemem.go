// Package nodemem answers "does it fit in this node's memory?" before a
// command allocates, the one way batchkit asks it (bench's buffers,
// train's model and steps): the memory a process may still take, and the
// one-line refusal of work whose ranks on a node need more. The OOM killer
// would end a rank without a word, a failed allocation with a Go panic.
package nodemem

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/internal/bytesize"
)

// Available is the memory this process can still take, in bytes:
// MemAvailable of /proc/meminfo, or less where a control group limits the
// process (a Slurm job's --mem under ConstrainRAMSpace, a container); 0
// when unknown.
func Available() int64 { return available(os.ReadFile) }

// available is Available over read, a file reader (tests pass a map).
func available(read func(string) ([]byte, error)) int64 {
	avail := memAvailable(read)
	if left, ok := cgroupLeft(read); ok && (avail <= 0 || left < avail) {
		avail = max(left, 1) // 0 means unknown
	}
	return avail
}

// memAvailable is MemAvailable from /proc/meminfo in bytes, 0 if unknown.
func memAvailable(read func(string) ([]byte, error)) int64 {
	b, err := read("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// cgroupLeft is the least any control group of this process, or of its
// parents, lets it take still (limit less usage): the limit of a Slurm job
// is on the job's group, above the step's and the task's. cgroup v2
// (memory.max, memory.current) or v1's memory controller
// (memory.limit_in_bytes, memory.usage_in_bytes). ok is false without a
// limit.
func cgroupLeft(read func(string) ([]byte, error)) (left int64, ok bool) {
	b, err := read("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	left = math.MaxInt64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3) // ID:controllers:path
		if len(f) != 3 {
			continue
		}
		var root, limitFile, usageFile string
		switch {
		case f[0] == "0" && f[1] == "":
			root, limitFile, usageFile = "/sys/fs/cgroup", "memory.max", "memory.current"
		case hasController(f[1], "memory"):
			root, limitFile, usageFile = "/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"
		default:
			continue
		}
		for dir := path.Clean(f[2]); ; dir = path.Dir(dir) {
			limit, lok := readBytes(read, path.Join(root, dir, limitFile))
			usage, uok := readBytes(read, path.Join(root, dir, usageFile))
			if lok && uok && limit < 1<<62 { // v1 says "no limit" with a number near 2^63
				left, ok = min(left, max(limit-usage, 0)), true
			}
			if dir == "/" {
				break
			}
		}
	}
	return left, ok
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readBytes reads a cgroup file of one number ("max" is no number).
func readBytes(read func(string) ([]byte, error), file string) (int64, bool) {
	b, err := read(file)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return n, err == nil
}

// NeedError is work whose ranks on a node need more memory than the node
// has for them.
type NeedError struct {
	What    string // what takes it: "the allreduce buffers"
	PerRank int64
	Ranks   int // on this node
	Avail   int64
}

func (e *NeedError) Error() string {
	here := ""
	if e.Ranks > 1 {
		here = fmt.Sprintf(", %s for the %d ranks on this node", bytesize.Format(satMul(e.PerRank, e.Ranks)), e.Ranks)
	}
	return fmt.Sprintf("%s take %s per rank%s, and this node has %s available", e.What, bytesize.Format(e.PerRank), here, bytesize.Format(e.Avail))
}

// Check refuses, with a *NeedError, work of perRank bytes on each of the
// node's ranks when together they need more than avail (Available; 0 when
// unknown, which is not refused).
func Check(what string, perRank int64, ranks int, avail int64) error {
	ranks = max(ranks, 1)
	if avail <= 0 || satMul(perRank, ranks) <= avail {
		return nil
	}
	return &NeedError{What: what, PerRank: perRank, Ranks: ranks, Avail: avail}
}

// satMul is a·n, or MaxInt64 where that overflows.
func satMul(a int64, n int) int64 {
	if n > 0 && a > math.MaxInt64/int64(n) {
		return math.MaxInt64
	}
	return a * int64(n)
}
