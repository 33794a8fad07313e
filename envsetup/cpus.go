package envsetup

import (
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// CPU is one logical CPU (a hardware thread) and where it sits: Core is its
// core_id, unique only within its Socket (physical_package_id), as in
// /sys/devices/system/cpu/cpuN/topology.
type CPU struct {
	ID     int
	Core   int
	Socket int
}

// CPUSet is what Pinning needs to know about this node's CPUs: the CPUs
// this process may run on (its affinity mask, which a cgroup cpuset, srun
// --cpu-bind or an MPI launcher's pinning may have narrowed) with their
// topology, and how many CPUs the node has online.
type CPUSet struct {
	Allowed []CPU // sorted by ID
	Online  int
}

// ReadCPUs reads this process's CPUs under root ("/" in production; a fake
// tree in tests): the affinity mask from proc/self/status
// (Cpus_allowed_list, which is sched_getaffinity's mask), the online count
// from sys/devices/system/cpu/online and each allowed CPU's core and socket
// from sys/devices/system/cpu/cpuN/topology. A CPU whose topology files are
// missing (some containers hide them) counts as a core of its own on socket 0.
func ReadCPUs(root string) (CPUSet, error) {
	status := filepath.Join(root, "proc/self/status")
	b, err := os.ReadFile(status)
	if err != nil {
		return CPUSet{}, fmt.Errorf("reading the affinity mask: %w", err)
	}
	var allowed []int
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			if allowed, err = ParseCPUList(strings.TrimSpace(v)); err != nil {
				return CPUSet{}, fmt.Errorf("%s: Cpus_allowed_list: %w", status, err)
			}
		}
	}
	if len(allowed) == 0 {
		return CPUSet{}, fmt.Errorf("%s: no Cpus_allowed_list", status)
	}
	cpuDir := filepath.Join(root, "sys/devices/system/cpu")
	online := len(allowed)
	if b, err := os.ReadFile(filepath.Join(cpuDir, "online")); err == nil {
		ids, err := ParseCPUList(strings.TrimSpace(string(b)))
		if err != nil {
			return CPUSet{}, fmt.Errorf("%s/online: %w", cpuDir, err)
		}
		online = max(len(ids), online)
	}
	set := CPUSet{Online: online}
	for _, id := range allowed {
		c := CPU{ID: id, Core: id}
		dir := filepath.Join(cpuDir, "cpu"+strconv.Itoa(id), "topology")
		core, okCore, err := readInt(filepath.Join(dir, "core_id"))
		if err != nil {
			return CPUSet{}, err
		}
		sock, okSock, err := readInt(filepath.Join(dir, "physical_package_id"))
		if err != nil {
			return CPUSet{}, err
		}
		if okCore && okSock {
			c.Core, c.Socket = core, sock
		}
		set.Allowed = append(set.Allowed, c)
	}
	return set, nil
}

// readInt reads a one-number sysfs file; ok is false when it does not exist.
func readInt(path string) (n int, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", path, err)
	}
	return n, true, nil
}

// ParseCPUList parses the kernel's cpulist format ("0-3,8,10-11"), the one
// of Cpus_allowed_list, /sys/.../online and taskset -c. The result is
// sorted and without duplicates.
func ParseCPUList(s string) ([]int, error) {
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad CPU %q in %q", lo, s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad CPU range %q in %q", part, s)
			}
		}
		for i := a; i <= b; i++ {
			seen[i] = true
		}
	}
	out := make([]int, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Ints(out)
	return out, nil
}

// FormatCPUList writes ids in order, comma-separated, without ranges: the
// form every consumer here accepts (oneCCL's and Intel OpenMP's lists take
// ranges too, but one number per entry keeps "the i-th entry" readable).
func FormatCPUList(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, ",")
}

// hexMask is the CPUs as one hexadecimal bit mask, bit i for CPU i, without
// a 0x prefix: an element of I_MPI_PIN_DOMAIN's [m1,...,mn] form.
func hexMask(ids []int) string {
	var m big.Int
	for _, id := range ids {
		m.SetBit(&m, id, 1)
	}
	return strings.ToUpper(m.Text(16))
}
