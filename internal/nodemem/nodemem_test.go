package nodemem

import (
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const meminfo = "MemTotal:       24000000 kB\nMemFree:        20000000 kB\nMemAvailable:   16777216 kB\n"

func TestAvailable(t *testing.T) {
	const gib = int64(1) << 30
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"MemAvailable", map[string]string{"/proc/meminfo": meminfo}, 16 * gib},
		{"no /proc/meminfo: unknown", map[string]string{}, 0},
		{"no MemAvailable line (old kernel): unknown", map[string]string{"/proc/meminfo": "MemTotal: 1 kB\n"}, 0},
		{"cgroup v2 without a limit", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "0::/user.slice\n",
			"/sys/fs/cgroup/user.slice/memory.max": "max\n", "/sys/fs/cgroup/user.slice/memory.current": "1000\n"}, 16 * gib},
		{"a Slurm job's limit, two groups up (v2)", map[string]string{"/proc/meminfo": meminfo,
			"/proc/self/cgroup":                                       "0::/slurm/job_7/step_0/task_0\n",
			"/sys/fs/cgroup/slurm/job_7/memory.max":                   "4294967296\n",
			"/sys/fs/cgroup/slurm/job_7/memory.current":               "1073741824\n",
			"/sys/fs/cgroup/slurm/job_7/step_0/task_0/memory.max":     "max\n",
			"/sys/fs/cgroup/slurm/job_7/step_0/task_0/memory.current": "1\n"}, 3 * gib},
		{"cgroup v1's memory controller", map[string]string{"/proc/meminfo": meminfo,
			"/proc/self/cgroup": "4:memory:/docker/abc\n3:cpuset:/\n",
			"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "2147483648\n",
			"/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": "1073741824\n"}, 1 * gib},
		{"cgroup v1 without a limit (a number near 2^63)", map[string]string{"/proc/meminfo": meminfo,
			"/proc/self/cgroup":                           "4:cpu,memory:/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
			"/sys/fs/cgroup/memory/memory.usage_in_bytes": "1073741824\n"}, 16 * gib},
		{"a group at its limit: 1 byte, never 0 (unknown)", map[string]string{"/proc/meminfo": meminfo, "/proc/self/cgroup": "0::/j\n",
			"/sys/fs/cgroup/j/memory.max": "100\n", "/sys/fs/cgroup/j/memory.current": "200\n"}, 1},
		{"a limit and no /proc/meminfo", map[string]string{"/proc/self/cgroup": "0::/j\n",
			"/sys/fs/cgroup/j/memory.max": "300\n", "/sys/fs/cgroup/j/memory.current": "100\n"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func(name string) ([]byte, error) {
				if s, ok := tc.files[name]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			}
			if got := available(read); got != tc.want {
				t.Errorf("available = %d, want %d", got, tc.want)
			}
		})
	}
	if Available() <= 0 {
		t.Error("Available found nothing on this machine")
	}
}

func TestCheck(t *testing.T) {
	const gib = int64(1) << 30
	for _, tc := range []struct {
		name           string
		perRank, avail int64
		ranks          int
		want           string // "" = accepted
	}{
		{"fits", 8 * gib, 16 * gib, 2, ""},
		{"one rank too big", 16 * gib, 15 * gib, 1, "the buffers take 16 GiB per rank, and this node has 15 GiB available"},
		{"the node's ranks share it", 16 * gib, 20 * gib, 2, "the buffers take 16 GiB per rank, 32 GiB for the 2 ranks on this node, and this node has 20 GiB available"},
		{"unknown memory: no check", 1 << 62, 0, 8, ""},
		{"no overflow", 1 << 62, gib, 4, "the buffers take 4194304 TiB per rank, 8388608 TiB for the 4 ranks on this node, and this node has 1 GiB available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := Check("the buffers", tc.perRank, tc.ranks, tc.avail); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
		})
	}
}
