package detect

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/internal/infile"
	"github.com/batchkit/batchkit/topology"
)

// files is a ReadFile over a map: a missing path is fs.ErrNotExist, a
// value of "FIFO" what infile.Read says of one.
func files(m map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		v, ok := m[p]
		switch {
		case !ok:
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		case v == "FIFO":
			return nil, &infile.NotRegularError{Path: p, Kind: "a FIFO"}
		}
		return []byte(v), nil
	}
}

// The host files of the runs in observed-env.md.
var hostfiles = files(map[string]string{
	"/tmp/hf21": "node2\nnode1\n", "/tmp/hf22": "# c\nnode2*2,node1\n", "/tmp/hf23": "node2\nnode1\nnode1\n",
	"/tmp/old": "node1\nnode2\n", "/tmp/short": "node2\n", "/tmp/fifo": "FIFO",
})

// dist adds what srun -m NAME exports to a task.
func dist(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// srun's tasks on the local cluster under each distribution (the
// variables as observed-env.md and the runs behind TestDistribution in
// ./integration show them): MASTER_ADDR is always the host of rank 0.
func TestDistribution(t *testing.T) {
	port7 := topology.PortForJob("7")
	slurmTop := func(rank, world, local, localSize, node int, master string) topology.Topology {
		return topology.Topology{Launcher: topology.Slurm, Rank: rank, WorldSize: world, LocalRank: local, LocalWorldSize: localSize,
			NodeRank: node, NumNodes: 2, Hosts: []string{"node1", "node2"}, MasterAddr: master, MasterPort: port7, JobID: "7"}
	}
	tests := []struct {
		name string
		env  topology.Getenv
		want topology.Topology
		err  string // a substring of the error; "" none
	}{
		{name: "srun -N2 -n3 (no SLURM_DISTRIBUTION: block), rank 2 on node2",
			env: env(srunTask("2", "0", "1", "3", "2,1", "2")), want: slurmTop(2, 3, 0, 1, 1, "node1")},
		{name: "srun -m cyclic -N2 -n3, rank 1 on node2",
			env:  env(srunTask("1", "0", "1", "3", "2,1", "2"), dist("SLURM_DISTRIBUTION", "cyclic")),
			want: slurmTop(1, 3, 0, 1, 1, "node1")},
		{name: "srun -m cyclic -N2 -n3, rank 2 second on node1",
			env:  env(srunTask("2", "1", "0", "3", "2,1", "2"), dist("SLURM_DISTRIBUTION", "cyclic")),
			want: slurmTop(2, 3, 1, 2, 0, "node1")},
		{name: "srun -m plane=2 -N2 -n3, rank 2 on node2",
			env:  env(srunTask("2", "0", "1", "3", "2,1", "2"), dist("SLURM_DISTRIBUTION", "plane", "SLURM_DIST_PLANESIZE", "2")),
			want: slurmTop(2, 3, 0, 1, 1, "node1")},
		{name: "srun -m block:block,Pack",
			env:  env(srunTask("1", "1", "0", "3", "2,1", "2"), dist("SLURM_DISTRIBUTION", "block:block,pack")),
			want: slurmTop(1, 3, 1, 2, 0, "node1")},
		{name: "srun -m arbitrary -n2, host file node2 then node1: rank 0 on node2",
			env:  env(srunTask("0", "0", "1", "2", "1(x2)", "2"), dist("SLURM_DISTRIBUTION", "arbitrary", "SLURM_HOSTFILE", "/tmp/hf21")),
			want: slurmTop(0, 2, 0, 1, 1, "node2")},
		{name: "srun -m arbitrary -n2, rank 1 on node1 is told node2",
			env:  env(srunTask("1", "0", "0", "2", "1(x2)", "2"), dist("SLURM_DISTRIBUTION", "arbitrary", "SLURM_HOSTFILE", "/tmp/hf21")),
			want: slurmTop(1, 2, 0, 1, 0, "node2")},
		{name: "SLURM_HOSTFILE with node2*2,node1 (srun then uses arbitrary), rank 2 on node1",
			env:  env(srunTask("2", "0", "0", "3", "1,2", "2"), dist("SLURM_DISTRIBUTION", "arbitrary", "SLURM_HOSTFILE", "/tmp/hf22")),
			want: slurmTop(2, 3, 0, 1, 0, "node2")},
		{name: "srun -m arbitrary -w node2,node1: no host file, MASTER_ADDR set by the user wins",
			env:  env(srunTask("1", "0", "0", "2", "1(x2)", "2"), dist("SLURM_DISTRIBUTION", "arbitrary", "MASTER_ADDR", "node2")),
			want: slurmTop(1, 2, 0, 1, 0, "node2")},
		{name: "srun -m arbitrary -w node2,node1: no host file, so no one can tell",
			env: env(srunTask("1", "0", "0", "2", "1(x2)", "2"), dist("SLURM_DISTRIBUTION", "arbitrary")),
			err: `slurm environment: SLURM_DISTRIBUTION="arbitrary": no SLURM_HOSTFILE says where the tasks run (srun -m arbitrary -w): cannot tell which host holds rank 0; set MASTER_ADDR to it`},
		{name: "arbitrary on one node: rank 0 is there",
			env: env(srunTask("1", "1", "0", "2", "2", "1"), dist("SLURM_DISTRIBUTION", "arbitrary", "SLURM_STEP_NODELIST", "node2", "SLURM_JOB_NODELIST", "node2")),
			want: topology.Topology{Launcher: topology.Slurm, Rank: 1, WorldSize: 2, LocalRank: 1, LocalWorldSize: 2,
				NumNodes: 1, Hosts: []string{"node2"}, MasterAddr: "node2", MasterPort: port7, JobID: "7"}},
		{name: "the host file is a FIFO",
			env: env(srunTask("1", "0", "0", "2", "1(x2)", "2"), dist("SLURM_DISTRIBUTION", "arbitrary", "SLURM_HOSTFILE", "/tmp/fifo")),
			err: `SLURM_HOSTFILE="/tmp/fifo": is a FIFO, not a regular file: cannot tell which host holds rank 0; set MASTER_ADDR to it`},
		{name: "the host file is gone",
			env: env(srunTask("1", "0", "0", "2", "1(x2)", "2"), dist("SLURM_DISTRIBUTION", "arbitrary", "SLURM_HOSTFILE", "/tmp/gone")),
			err: `SLURM_HOSTFILE="/tmp/gone": open /tmp/gone: file does not exist: cannot tell`},
		{name: "the host file changed since srun read it: rank 0 says so",
			env: env(srunTask("0", "0", "1", "2", "1(x2)", "2"), dist("SLURM_DISTRIBUTION", "arbitrary", "SLURM_HOSTFILE", "/tmp/old")),
			err: `SLURM_HOSTFILE="/tmp/old": lists "node1" for rank 0, which runs elsewhere (the file changed since srun read it?)`},
		{name: "the host file lists fewer hosts than tasks",
			env: env(srunTask("0", "0", "1", "2", "1(x2)", "2"), dist("SLURM_DISTRIBUTION", "arbitrary", "SLURM_HOSTFILE", "/tmp/short")),
			err: `SLURM_HOSTFILE="/tmp/short": lists 1 hosts for 2 tasks: cannot tell`},
		{name: "a distribution batchkit does not know, on two nodes",
			env: env(srunTask("0", "0", "0", "2", "1(x2)", "2"), dist("SLURM_DISTRIBUTION", "spiral")),
			err: `SLURM_DISTRIBUTION="spiral": not a distribution batchkit knows: cannot tell which host holds rank 0; set MASTER_ADDR to it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.env, Options{ReadFile: hostfiles})
			checkResult(t, got, err, tt.want, tt.err)
		})
	}
}

// Without Options.ReadFile a host file is read only if regular and small:
// a FIFO neither blocks nor is read, /dev/zero is not read for ever.
func TestHostfileHostile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("node2\n", maxHostfile/6+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("node2\nnode1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "is a FIFO, not a regular file"},
		{"/dev/zero", "is a character device, not a regular file"},
		{big, "more than the 16777216 such a file may have"},
		{good, ""},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			e := env(srunTask("1", "0", "0", "2", "1(x2)", "2"), dist("SLURM_DISTRIBUTION", "arbitrary", "SLURM_HOSTFILE", tc.path))
			got, err := Detect(e, Options{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want == "" && got.MasterAddr != "node2":
				t.Errorf("master %q, want node2", got.MasterAddr)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// The batch script asked for its allocation follows a host file as the
// srun it is about to run will: rank 0 where the file says.
func TestAllocationHostfile(t *testing.T) {
	// sbatch -m arbitrary -n3 with SLURM_HOSTFILE listing node2, node1,
	// node1: Slurm sets no SLURM_TASKS_PER_NODE in the batch script.
	job := map[string]string{
		"SLURM_JOB_ID": "2317", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2",
		"SLURM_NTASKS": "3", "SLURM_NPROCS": "3", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
		"SLURM_JOB_CPUS_PER_NODE": "2,1", "SLURM_ARBITRARY_NODELIST": "node[1-2]",
	}
	port := topology.PortForJob("2317")
	rank0OnNode2 := topology.Topology{Launcher: topology.SlurmBatch, WorldSize: 3, LocalWorldSize: 1, NodeRank: 1, NumNodes: 2,
		Hosts: []string{"node1", "node2"}, MasterAddr: "node2", MasterPort: port, JobID: "2317"}
	tests := []struct {
		name string
		env  topology.Getenv
		want topology.Topology
		err  string
	}{
		{"sbatch -m arbitrary", env(job, dist("SLURM_DISTRIBUTION", "arbitrary", "SLURM_HOSTFILE", "/tmp/hf23")), rank0OnNode2, ""},
		{"SLURM_HOSTFILE exported in the script: srun will use it",
			env(job, dist("SLURM_HOSTFILE", "/tmp/hf23", "SLURM_TASKS_PER_NODE", "2,1")), rank0OnNode2, ""},
		{"a host file on one node of two: the step runs there",
			env(job, dist("SLURM_HOSTFILE", "/tmp/one", "SLURM_NTASKS", "2", "SLURM_NPROCS", "2")),
			topology.Topology{Launcher: topology.SlurmBatch, WorldSize: 2, LocalWorldSize: 2, NumNodes: 1,
				Hosts: []string{"node2"}, MasterAddr: "node2", MasterPort: port, JobID: "2317"}, ""},
		{"a host on no node of the job", env(job, dist("SLURM_HOSTFILE", "/tmp/other")), topology.Topology{},
			`SLURM_HOSTFILE="/tmp/other": lists host "node9", which is not in the job's node list`},
		{"arbitrary without its host file", env(job, dist("SLURM_DISTRIBUTION", "arbitrary")), topology.Topology{},
			`SLURM_DISTRIBUTION="arbitrary": no SLURM_HOSTFILE says where the tasks run`},
		// The known quirk of issue 24: `="": tasks per node sum to 2 but SLURM_NTASKS=3`.
		{"no tasks per node and no host file: the variable missing is named", env(job), topology.Topology{},
			"incomplete slurm-batch environment: SLURM_JOB_ID=2317 is set but SLURM_TASKS_PER_NODE is not"},
	}
	read := files(map[string]string{"/tmp/hf23": "node2\nnode1\nnode1\n", "/tmp/one": "node2*2\n", "/tmp/other": "node9\nnode1\nnode1\n"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.env, Options{Allocation: true, ReadFile: read})
			checkResult(t, got, err, tt.want, tt.err)
		})
	}
}

// checkResult compares a Detect result with want, or its error with a
// substring, which must be one line naming its variable.
func checkResult(t *testing.T, got topology.Topology, err error, want topology.Topology, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one containing %q", err, wantErr)
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || emptyVar.MatchString(msg) {
			t.Errorf("error %q: want one line naming its variable", msg)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, placementOnly); diff != "" {
		t.Errorf("Detect (-want +got):\n%s", diff)
	}
}

// emptyVar is an error quoting a value without the variable's name, as
// `="": tasks per node sum to 1` did (a value with a blank is quoted).
var emptyVar = regexp.MustCompile(`(^|: )="`)

// A heterogeneous job (salloc -N1 -n1 : -N1 -n2) with the variables Slurm
// 22.05 set on the local cluster (observed-env.md); g0 and g1 are the
// groups' node lists.
func hetJob(g0, g1 string) map[string]string {
	m := map[string]string{"SLURM_JOB_ID": "2319", "SLURM_JOBID": "2319", "SLURM_HET_SIZE": "2", "SLURM_PACK_SIZE": "2"}
	for _, kind := range []string{"HET", "PACK"} {
		for g, v := range map[string][]string{
			"0": {"2319", g0, "1", "1", "1"},
			"1": {"2320", g1, "2", "2", "1"},
		} {
			for i, name := range []string{"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NTASKS", "SLURM_TASKS_PER_NODE", "SLURM_JOB_NUM_NODES"} {
				m[name+"_"+kind+"_GROUP_"+g] = v[i]
			}
			m["SLURM_NODELIST_"+kind+"_GROUP_"+g] = g0
			if g == "1" {
				m["SLURM_NODELIST_"+kind+"_GROUP_"+g] = g1
			}
		}
	}
	return m
}

// hetTask is a task of `srun --het-group=0,1` in it: the step's lists in
// node-list order, SLURM_NODEID group by group.
func hetTask(procid, localid, nodeid, node, tpn string) map[string]string {
	return map[string]string{
		"SLURM_STEP_ID": "0", "SLURM_STEPID": "0", "SLURM_PROCID": procid, "SLURM_LOCALID": localid, "SLURM_NODEID": nodeid,
		"SLURMD_NODENAME": node, "SLURM_NTASKS": "3", "SLURM_NPROCS": "3", "SLURM_STEP_NUM_TASKS": "3",
		"SLURM_STEP_NUM_NODES": "2", "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2",
		"SLURM_STEP_NODELIST": "node[1-2]", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_NODELIST": "node[1-2]",
		"SLURM_STEP_TASKS_PER_NODE": tpn, "SLURM_TASKS_PER_NODE": tpn, "SLURM_DISTRIBUTION": "block",
	}
}

// Heterogeneous jobs: the salloc shell, the sbatch batch script, and the
// steps of one or of both groups, with the variables real Slurm set.
func TestHetJob(t *testing.T) {
	port := topology.PortForJob("2319")
	het := func(rank, local, localSize, node int, hosts ...string) topology.Topology {
		return topology.Topology{Launcher: topology.Slurm, Rank: rank, WorldSize: 3, LocalRank: local, LocalWorldSize: localSize,
			NodeRank: node, NumNodes: 2, Hosts: hosts, MasterAddr: hosts[0], MasterPort: port, JobID: "2319"}
	}
	tests := []struct {
		name string
		env  topology.Getenv
		opts Options
		want topology.Topology
		err  string
	}{
		{name: "the salloc shell: SLURM_NTASKS=3 and no SLURM_TASKS_PER_NODE, SLURM_NNODES or node list",
			env: env(hetJob("node1", "node2"), dist("SLURM_NTASKS", "3", "SLURM_NPROCS", "3")), opts: Options{Hostname: "vm"},
			want: topology.Topology{Launcher: topology.SlurmBatch, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1,
				Hosts: []string{"vm"}, MasterAddr: "127.0.0.1", MasterPort: port, JobID: "2319"}},
		{name: "the salloc shell asked for its allocation (issue 24's `=\"\": tasks per node sum to 1`)",
			env: env(hetJob("node1", "node2"), dist("SLURM_NTASKS", "3", "SLURM_NPROCS", "3")), opts: Options{Allocation: true},
			err: `SLURM_HET_SIZE="2": a heterogeneous job's allocation has no single shape: run batchkit env in its step (srun --het-group=...)`},
		{name: "the batch script of an sbatch het job: its variables are group 0's, which a plain srun runs",
			env: env(hetJob("node1", "node2"), dist("SLURM_NTASKS", "1", "SLURM_TASKS_PER_NODE", "1", "SLURM_NNODES", "1",
				"SLURM_JOB_NODELIST", "node1", "SLURM_NODELIST", "node1", "SLURM_PROCID", "0")),
			opts: Options{Allocation: true},
			want: topology.Topology{Launcher: topology.SlurmBatch, WorldSize: 1, LocalWorldSize: 1, NumNodes: 1,
				Hosts: []string{"node1"}, MasterAddr: "node1", MasterPort: port, JobID: "2319"}},
		{name: "srun --het-group=0,1, rank 0 alone on node1",
			env: env(hetJob("node1", "node2"), hetTask("0", "0", "0", "node1", "1,2")), want: het(0, 0, 1, 0, "node1", "node2")},
		{name: "srun --het-group=0,1, rank 2 second on node2",
			env: env(hetJob("node1", "node2"), hetTask("2", "1", "1", "node2", "1,2")), want: het(2, 1, 2, 1, "node1", "node2")},
		{name: "groups against node-list order (group 0 on node2): rank 0 on node2 has SLURM_NODEID=0",
			env: env(hetJob("node2", "node1"), hetTask("0", "0", "0", "node2", "2,1")), want: het(0, 0, 1, 0, "node2", "node1")},
		{name: "groups against node-list order: rank 2 on node1 has SLURM_NODEID=1 and is told node2",
			env: env(hetJob("node2", "node1"), hetTask("2", "1", "1", "node1", "2,1")), want: het(2, 1, 2, 1, "node2", "node1")},
		{name: "srun --het-group=1: a plain step of group 1, on node1",
			env: env(hetJob("node2", "node1"), srunTask("1", "1", "0", "2", "2", "1"), dist("SLURM_JOB_ID", "2319",
				"SLURM_STEP_NODELIST", "node1", "SLURM_JOB_NODELIST", "node1", "SLURMD_NODENAME", "node1")),
			want: topology.Topology{Launcher: topology.Slurm, Rank: 1, WorldSize: 2, LocalRank: 1, LocalWorldSize: 2,
				NumNodes: 1, Hosts: []string{"node1"}, MasterAddr: "node1", MasterPort: port, JobID: "2319"}},
		{name: "a node id that does not name this task's host, and no group order explains it",
			env: env(hetTask("0", "0", "0", "node2", "2,1"), dist("SLURM_JOB_ID", "2319")),
			err: `SLURM_NODEID="0": names "node1", node 0 of the step's node list, but this task runs on SLURMD_NODENAME="node2"`},
		{name: "SLURM_HET_SIZE that is not a count",
			env: env(hetJob("node1", "node2"), hetTask("0", "0", "0", "node1", "1,2"), dist("SLURM_HET_SIZE", "two")),
			err: `SLURM_HET_SIZE="two": not a group count (1-1024)`},
		{name: "a group's node list that does not parse",
			env: env(hetJob("node1", "node[2"), hetTask("0", "0", "0", "node1", "1,2")),
			err: `SLURM_JOB_NODELIST_HET_GROUP_1: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.env, tt.opts)
			checkResult(t, got, err, tt.want, tt.err)
		})
	}
}

// errors.As still finds the cause behind a host file error.
func TestHostfileErrorUnwraps(t *testing.T) {
	_, err := Detect(env(srunTask("1", "0", "0", "2", "1(x2)", "2"), dist("SLURM_DISTRIBUTION", "arbitrary", "SLURM_HOSTFILE", "/tmp/fifo")),
		Options{ReadFile: hostfiles})
	var nr *infile.NotRegularError
	if !errors.As(err, &nr) {
		t.Errorf("error %v: want an *infile.NotRegularError inside", err)
	}
}
