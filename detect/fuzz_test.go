package detect

import (
	"slices"
	"strings"
	"testing"

	"github.com/batchkit/batchkit/topology"
)

// fuzzEnv parses the fuzzer's environment: NAME=VALUE lines, `\n` in a
// value standing for a newline (so values may hold one). Every host file
// a rank reads has the content hostfile.
func fuzzEnv(vars string) topology.Getenv {
	m := map[string]string{}
	for line := range strings.SplitSeq(vars, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = strings.ReplaceAll(v, `\n`, "\n")
		}
	}
	return topology.MapEnv(m)
}

// Arbitrary values for the launcher variables of every layer (seeds in
// testdata/fuzz/FuzzDetect: torchrun, Open MPI, Hydra, srun steps under
// each distribution, host files, heterogeneous jobs, the batch script):
// Detect never panics or hangs, an error is one line that names its
// variable, and a Topology it returns is one a rank can use.
func FuzzDetect(f *testing.F) {
	f.Add("SLURM_JOB_ID=7\nSLURM_STEP_ID=0\nSLURM_PROCID=1\nSLURM_LOCALID=0\nSLURM_NODEID=0\nSLURM_NTASKS=2\n"+
		"SLURM_STEP_TASKS_PER_NODE=1(x2)\nSLURM_STEP_NODELIST=node[1-2]\nSLURM_DISTRIBUTION=arbitrary\nSLURM_HOSTFILE=/hf",
		false, []byte("node2\nnode1\n"))
	f.Fuzz(func(t *testing.T, vars string, allocation bool, hostfile []byte) {
		read := func(string) ([]byte, error) { return hostfile, nil }
		top, err := Detect(fuzzEnv(vars), Options{Allocation: allocation, Hostname: "h", ReadFile: read})
		if err != nil {
			msg := err.Error()
			if msg == "" || strings.ContainsAny(msg, "\n\r") || emptyVar.MatchString(msg) {
				t.Fatalf("error %q: want one line naming its variable", msg)
			}
			return
		}
		if err := top.Validate(); err != nil {
			t.Fatalf("%+v: %v", top, err)
		}
		if top.MasterPort < 1 || top.MasterPort > 65535 {
			t.Fatalf("master port %d", top.MasterPort)
		}
		// A Slurm step lists its nodes: one host per node, rank 0's among them.
		if top.Launcher == topology.Slurm && len(top.Hosts) > 0 {
			if len(top.Hosts) != top.NumNodes {
				t.Fatalf("%d hosts for %d nodes: %+v", len(top.Hosts), top.NumNodes, top)
			}
			if fuzzEnv(vars)("MASTER_ADDR") == "" && !slices.Contains(top.Hosts, top.MasterAddr) {
				t.Fatalf("master %q is none of the hosts %q", top.MasterAddr, top.Hosts)
			}
		}
	})
}
