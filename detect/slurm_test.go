package detect

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/topology"
)

// The Slurm step under a torchrun layer (moved from slurm.StepRank's test):
// its rank and task count, read by the Slurm step's row.
func TestOuterLayerSlurm(t *testing.T) {
	type result struct {
		Rank, Size topology.Value
		OK         bool
	}
	tests := []struct {
		name string
		env  map[string]string
		want result
	}{
		{"the batch script is not a task",
			map[string]string{"SLURM_JOB_ID": "1", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"},
			result{}},
		{"the step's own task count wins",
			map[string]string{"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_STEP_NUM_TASKS": "3"},
			result{topology.Value{Var: "SLURM_PROCID", Raw: "2", N: 2}, topology.Value{Var: "SLURM_STEP_NUM_TASKS", Raw: "3", N: 3}, true}},
		{"SLURM_NTASKS without the step count",
			map[string]string{"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"},
			result{topology.Value{Var: "SLURM_PROCID", Raw: "1", N: 1}, topology.Value{Var: "SLURM_NTASKS", Raw: "2", N: 2}, true}},
		{"no rank: not usable",
			map[string]string{"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "2"},
			result{Size: topology.Value{Var: "SLURM_NTASKS", Raw: "2", N: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok, err := outerLayer(topology.MapEnv(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, result{p.rank, p.size, ok}); diff != "" {
				t.Errorf("outerLayer (-want +got):\n%s", diff)
			}
		})
	}
}

// A task count of 0 is a one-line error naming the variable, not a topology
// that fails validation later without saying where it came from.
func TestZeroTaskCounts(t *testing.T) {
	job := map[string]string{"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n[1-2]"}
	with := func(kv ...string) topology.Getenv {
		m := map[string]string{}
		for k, v := range job {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return topology.MapEnv(m)
	}
	tests := []struct {
		name string
		env  topology.Getenv
		opts Options
		want []string
	}{
		{"step SLURM_NTASKS=0",
			with("SLURM_STEP_ID", "0", "SLURM_PROCID", "0", "SLURM_NTASKS", "0", "SLURM_LOCALID", "0", "SLURM_NODEID", "0", "SLURM_TASKS_PER_NODE", "0(x2)"),
			Options{}, []string{`SLURM_NTASKS="0"`, "at least 1"}},
		{"allocation SLURM_NTASKS=0",
			with("SLURM_NTASKS", "0"),
			Options{Allocation: true}, []string{`SLURM_NTASKS="0"`, "at least 1"}},
		{"allocation with no task on the first node",
			with("SLURM_TASKS_PER_NODE", "0,2"),
			Options{Allocation: true}, []string{`SLURM_TASKS_PER_NODE="0,2"`, "at least 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Detect(tt.env, tt.opts)
			if err == nil {
				t.Fatal("succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) || strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q: want one line containing %q", err, w)
				}
			}
		})
	}
}

// sbatch -N2 -n4 --ntasks-per-node=3: Slurm says SLURM_TASKS_PER_NODE=3(x2)
// and SLURM_NTASKS=4; srun in the job runs the 4 tasks 2+2 (seen on the
// local cluster), and so does the allocation's shape.
func TestAllocationMoreSlotsThanTasks(t *testing.T) {
	env := topology.MapEnv(map[string]string{
		"SLURM_JOB_ID": "8898", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_JOB_NUM_NODES": "2",
		"SLURM_NTASKS": "4", "SLURM_TASKS_PER_NODE": "3(x2)",
	})
	top, err := Detect(env, Options{Allocation: true})
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}
	if top.Launcher != topology.SlurmBatch || top.WorldSize != 4 || top.LocalWorldSize != 2 || top.NumNodes != 2 {
		t.Errorf("%s: world %d, local %d, nodes %d; want slurm-batch, 4, 2, 2", top.Launcher, top.WorldSize, top.LocalWorldSize, top.NumNodes)
	}
}
