package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchkit/batchkit/topology"
)

// hostOfRank0 checks that every rank of a step is told MASTER_ADDR = the
// host rank 0 runs on, which rank 0 names by its node rank, and that this
// is want.
func hostOfRank0(t *testing.T, tops []topology.Topology, world int, want string) {
	t.Helper()
	if len(tops) != world || tops[0].Rank != 0 {
		t.Fatalf("want %d ranks from 0, got %+v", world, tops)
	}
	host := tops[0].Hosts[tops[0].NodeRank]
	if host != want {
		t.Errorf("rank 0 runs on %q, want %q: %+v", host, want, tops[0])
	}
	for _, top := range tops {
		if top.MasterAddr != host {
			t.Errorf("rank %d: master_addr %q, but rank 0 runs on %q", top.Rank, top.MasterAddr, host)
		}
	}
}

// writeHostfile writes a SLURM_HOSTFILE every node can read.
func writeHostfile(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "hosts")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// MASTER_ADDR is the host of rank 0 under every srun distribution (issue
// 24 item 7): with a host file listing node2 first, rank 0 runs on node2.
func TestDistributionMasterAddr(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	tests := []struct {
		name     string
		hostfile string // SLURM_HOSTFILE's content; "" none
		args     []string
		world    int
		rank0    string
	}{
		{"arbitrary, node2 then node1", "node2\nnode1\n", []string{"-m", "arbitrary", "-n", "2"}, 2, "node2"},
		{"a host file alone (srun uses arbitrary), node2*2,node1", "node2*2,node1\n", []string{"-n", "3"}, 3, "node2"},
		{"cyclic", "", []string{"-m", "cyclic", "-N2", "-n3"}, 3, "node1"},
		{"plane=2", "", []string{"-m", "plane=2", "-N2", "-n3"}, 3, "node1"},
		{"block", "", []string{"-m", "block", "-N2", "-n3"}, 3, "node1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := os.Environ()
			if tt.hostfile != "" {
				env = append(env, "SLURM_HOSTFILE="+writeHostfile(t, tt.hostfile))
			}
			args := append(append([]string{}, tt.args...), bin, "env", "--format", "json")
			out := runEnvTimeout(t, 2*time.Minute, env, "srun", args...)
			hostOfRank0(t, parseTopologies(t, out), tt.world, tt.rank0)
		})
	}
}

// srun -m arbitrary -w node2,node1 leaves no trace of the order in the
// tasks' environment: every rank says so rather than guess, and
// MASTER_ADDR set by the user is taken.
func TestArbitraryWithoutHostfile(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "srun", "-m", "arbitrary", "-w", "node2,node1", "-n", "2", bin, "env", "--format", "json")
	msg, err := cmd.CombinedOutput()
	if err == nil || strings.Count(string(msg), "no SLURM_HOSTFILE says where the tasks run") != 2 ||
		!strings.Contains(string(msg), "set MASTER_ADDR") {
		t.Errorf("srun -m arbitrary -w: %v, want both ranks to fail naming SLURM_HOSTFILE and MASTER_ADDR:\n%s", err, msg)
	}
	out := runEnvTimeout(t, 2*time.Minute, append(os.Environ(), "MASTER_ADDR=node2"),
		"srun", "-m", "arbitrary", "-w", "node2,node1", "-n", "2", bin, "env", "--format", "json")
	hostOfRank0(t, parseTopologies(t, out), 2, "node2")
}

// A batch script that exports SLURM_HOSTFILE asked for its allocation: the
// srun it will run follows the host file (as under sbatch -m arbitrary,
// which takes the file from sbatch's own environment), so rank 0 is on
// node2.
func TestAllocationHostfile(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	hf := writeHostfile(t, "node2\nnode1\nnode1\n")
	out := sbatchWait(t, fmt.Sprintf("export SLURM_HOSTFILE=%s\n%s env --format json --allocation\nsrun %[2]s env --format json\n", hf, bin),
		"-N2", "-n3")
	tops := parseTopologies(t, out)
	if len(tops) != 4 {
		t.Fatalf("want 4 lines, got:\n%s", out)
	}
	alloc, step := tops[0], tops[1:] // the allocation says rank 0 too
	if alloc.Launcher != topology.SlurmBatch || alloc.WorldSize != 3 || alloc.MasterAddr != "node2" || alloc.LocalWorldSize != 1 {
		t.Errorf("allocation %+v: want world 3, rank 0 alone on node2", alloc)
	}
	hostOfRank0(t, step, 3, "node2")
}

// A heterogeneous job whose group 0 is on node2: `srun --het-group=0,1`
// numbers nodes group by group (issue 24 item 11), and every rank is told
// rank 0's host; --allocation in its salloc shell names the variable.
func TestHetJob(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	script := fmt.Sprintf("srun --het-group=0,1 %[1]s env --format json; %[1]s env --allocation 2>&1 || true", bin)
	out := run(t, 2*time.Minute, "salloc", "-N1", "-w", "node2", "-n1", ":", "-N1", "-w", "node1", "-n2", "bash", "-c", script)
	tops := parseTopologies(t, out)
	hostOfRank0(t, tops, 3, "node2")
	type place struct {
		Host      string
		LocalSize int
	}
	want := []place{{"node2", 1}, {"node1", 2}, {"node1", 2}}
	for _, top := range tops {
		if got := (place{top.Hosts[top.NodeRank], top.LocalWorldSize}); got != want[top.Rank] {
			t.Errorf("rank %d on %+v, want %+v", top.Rank, got, want[top.Rank])
		}
	}
	if !strings.Contains(out, `SLURM_HET_SIZE="2": a heterogeneous job's allocation has no single shape`) {
		t.Errorf("--allocation in the salloc shell of a het job:\n%s", out)
	}
}
