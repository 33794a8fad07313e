package envsetup

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/topology"
)

// Every format of a two-node topology; the shell formats quote what needs it.
func TestTopologyFormats(t *testing.T) {
	topo := topology.Topology{Launcher: topology.Slurm, Rank: 3, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2,
		NodeRank: 1, NumNodes: 2, Hosts: []string{"n1", "n2"}, MasterAddr: "n1", MasterPort: 29500, JobID: "42"}
	for _, tc := range []struct{ format, want string }{
		{"text", "launcher     slurm\nrank         3 of 4\nlocal rank   1 of 2\nnode         1 of 2\nhosts        n1,n2\nmaster       n1:29500\njob id       42\n"},
		{"torchrun", "RANK=3\nWORLD_SIZE=4\nLOCAL_RANK=1\nLOCAL_WORLD_SIZE=2\nNODE_RANK=1\nGROUP_RANK=1\nGROUP_WORLD_SIZE=2\nMASTER_ADDR=n1\nMASTER_PORT=29500\n"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			var b bytes.Buffer
			if err := TopologyFormats[tc.format](&b, topo); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	var b bytes.Buffer
	if err := TopologyFormats["shell"](&b, topology.Topology{MasterAddr: "a b", Hosts: []string{"h"}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Bytes(), []byte("export MASTER_ADDR='a b'\n")) || !bytes.Contains(b.Bytes(), []byte("export BATCHKIT_HOSTS=h\n")) {
		t.Errorf("shell: %q, want MASTER_ADDR quoted and the BATCHKIT_* extras", b.String())
	}
}
