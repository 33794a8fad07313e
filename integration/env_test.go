package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/slurm"
	"github.com/batchkit/batchkit/topology"
)

// checkJob asserts that tops are the ranks of one job laid out as
// perNode (tasks on each node, in node order): distinct ranks 0..n-1, local
// ranks and node ranks consistent with perNode under block placement, and
// one rendezvous point for all.
func checkJob(t *testing.T, tops []topology.Topology, launcher topology.Launcher, perNode []int, hosts []string) {
	t.Helper()
	world := 0
	for _, n := range perNode {
		world += n
	}
	if len(tops) != world {
		t.Fatalf("got %d topologies, want %d: %+v", len(tops), world, tops)
	}
	rank := 0
	for node, n := range perNode {
		for local := 0; local < n; local++ {
			got := tops[rank]
			want := topology.Topology{
				Launcher: launcher, Rank: rank, WorldSize: world, LocalRank: local, LocalWorldSize: n,
				NodeRank: node, NumNodes: len(perNode), Hosts: hosts,
				MasterAddr: tops[0].MasterAddr, MasterPort: tops[0].MasterPort, JobID: tops[0].JobID,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rank %d (-want +got):\n%s", rank, diff)
			}
			rank++
		}
	}
	if tops[0].MasterAddr != hosts[0] {
		t.Errorf("master_addr = %q, want the first host %q", tops[0].MasterAddr, hosts[0])
	}
	if tops[0].JobID == "" || tops[0].MasterPort != topology.PortForJob(tops[0].JobID) {
		t.Errorf("master_port %d for job %q: want PortForJob = %d", tops[0].MasterPort, tops[0].JobID, topology.PortForJob(tops[0].JobID))
	}
}

// srun -N2 -n4: Slurm is the launcher; its tasks-per-node decides the layout.
func TestSrunEnv(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	out := run(t, 2*time.Minute, "srun", "-N2", "-n4", "sh", "-c",
		`echo "tpn=$SLURM_STEP_TASKS_PER_NODE"; exec "$0" env --format json`, bin)
	var tpn string
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "tpn="); ok {
			tpn = v
		}
	}
	perNode, err := slurm.ParseTasksPerNode(tpn)
	if err != nil {
		t.Fatalf("SLURM_STEP_TASKS_PER_NODE %q: %v", tpn, err)
	}
	checkJob(t, parseTopologies(t, out), topology.Slurm, perNode, []string{"node1", "node2"})
}

func TestSrunTasksPerNode(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	out := run(t, 2*time.Minute, "srun", "-N2", "--ntasks-per-node=2", bin, "env", "--format", "json")
	checkJob(t, parseTopologies(t, out), topology.Slurm, []int{2, 2}, []string{"node1", "node2"})
}

// In the batch script itself the process is not a task: rank 0 of 1, unless
// asked for the allocation's shape.
func TestBatchScriptEnv(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	out := sbatchWait(t, fmt.Sprintf("%[1]s env --format json\n%[1]s env --format json --allocation\n", bin), "-N2", "--ntasks-per-node=2")
	var tops []topology.Topology
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var top topology.Topology
		if err := json.Unmarshal([]byte(line), &top); err != nil {
			t.Fatalf("line %q: %v\n%s", line, err, out)
		}
		tops = append(tops, top)
	}
	if len(tops) != 2 {
		t.Fatalf("want 2 lines, got:\n%s", out)
	}
	job := tops[0].JobID
	want := []topology.Topology{
		{Launcher: topology.SlurmBatch, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1, Hosts: []string{"node1"},
			MasterAddr: "node1", MasterPort: topology.PortForJob(job), JobID: job},
		{Launcher: topology.SlurmBatch, WorldSize: 4, LocalWorldSize: 2, NumNodes: 2, Hosts: []string{"node1", "node2"},
			MasterAddr: "node1", MasterPort: topology.PortForJob(job), JobID: job},
	}
	if diff := cmp.Diff(want, tops); diff != "" {
		t.Errorf("batch script (-want +got):\n%s", diff)
	}
}

// mpiLaunchers are the real mpirun flavours on this machine, with the
// flags they need inside the local allocation (both nodes are one host).
var mpiLaunchers = []struct {
	name, mpirun string
	args         []string
	launcher     topology.Launcher
}{
	{"openmpi", "mpirun.openmpi", []string{"--allow-run-as-root", "--oversubscribe"}, topology.OpenMPI},
	{"mpich", "mpirun.mpich", nil, topology.Hydra},
}

// Under mpirun inside `sbatch -N2 --ntasks-per-node=2`, every rank carries
// the launcher's stale Slurm step (SLURM_PROCID = node index); the MPI
// variables must win.
func TestMPIInsideSbatch(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	for _, l := range mpiLaunchers {
		t.Run(l.name, func(t *testing.T) {
			needTool(t, l.mpirun)
			line := strings.Join(append(append([]string{l.mpirun}, l.args...), "-n", "4", bin, "env", "--format", "json"), " ")
			out := sbatchWait(t, line+"\n", "-N2", "--ntasks-per-node=2")
			checkJob(t, parseTopologies(t, out), l.launcher, []int{2, 2}, []string{"node1", "node2"})
		})
	}
}

// mpirun.mpich -n 3 -ppn 2 in a 4-task allocation: PMI_SIZE=3 wins over
// SLURM_NTASKS=4, and rank 2 is alone on the second node.
func TestMPICHPartialAllocation(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	needTool(t, "mpirun.mpich")
	out := sbatchWait(t, fmt.Sprintf("mpirun.mpich -n 3 -ppn 2 %s env --format json\n", bin), "-N2", "--ntasks-per-node=2")
	checkJob(t, parseTopologies(t, out), topology.Hydra, []int{2, 1}, []string{"node1", "node2"})
}

// torchVars is a Python program that prints the torchrun contract it sees, as
// PyTorch's env:// rendezvous would read it.
// One line without single quotes, so a batch script can quote it with '...'.
// One write call per line: print() may write the text and its newline
// separately, and MPICH's output forwarding then interleaves two ranks'
// lines.
const torchVars = `import json, os, sys; sys.stdout.write(json.dumps({k: os.environ.get(k) for k in ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"]}) + "\n"); sys.stdout.flush()`

// checkExported compares what the program saw with what batchkit env says
// for the same layout.
func checkExported(t *testing.T, out string, perNode []int, host string) {
	t.Helper()
	var seen []map[string]string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "{") {
			var m map[string]string
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			seen = append(seen, m)
		}
	}
	world := 0
	for _, n := range perNode {
		world += n
	}
	if len(seen) != world {
		t.Fatalf("want %d ranks, got %d:\n%s", world, len(seen), out)
	}
	byRank := map[string]map[string]string{}
	for _, m := range seen {
		byRank[m["RANK"]] = m
	}
	rank := 0
	port := seen[0]["MASTER_PORT"]
	for node, n := range perNode {
		for local := 0; local < n; local++ {
			want := map[string]string{
				"RANK": fmt.Sprint(rank), "WORLD_SIZE": fmt.Sprint(world), "LOCAL_RANK": fmt.Sprint(local),
				"LOCAL_WORLD_SIZE": fmt.Sprint(n), "NODE_RANK": fmt.Sprint(node), "GROUP_RANK": fmt.Sprint(node),
				"MASTER_ADDR": host, "MASTER_PORT": port,
			}
			if diff := cmp.Diff(want, byRank[fmt.Sprint(rank)]); diff != "" {
				t.Errorf("rank %d saw (-want +got):\n%s", rank, diff)
			}
			rank++
		}
	}
	if port == "" || port == "0" {
		t.Errorf("MASTER_PORT %q not set", port)
	}
}

func TestExecUnderMPI(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	needTool(t, "python3")
	for _, l := range mpiLaunchers {
		t.Run(l.name, func(t *testing.T) {
			needTool(t, l.mpirun)
			script := fmt.Sprintf("%s %s -n 4 %s exec -- python3 -c '%s'\n", l.mpirun, strings.Join(l.args, " "), bin, torchVars)
			out := sbatchWait(t, script, "-N2", "--ntasks-per-node=2")
			checkExported(t, out, []int{2, 2}, "node1")
		})
	}
}

// A Python program started through batchkit exec under srun sees the
// torchrun contract.
func TestExecUnderSrunPython(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	needTool(t, "python3")
	out := run(t, 2*time.Minute, "srun", "-N2", "--ntasks-per-node=2", bin, "exec", "--", "python3", "-c", torchVars)
	checkExported(t, out, []int{2, 2}, "node1")
}
