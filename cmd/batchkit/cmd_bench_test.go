package main

import (
	"testing"

	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/bench"
	"github.com/batchkit/batchkit/trainer/collective"
)

func TestCheckMemory(t *testing.T) {
	const gib = int64(1) << 30
	allreduce := bench.Options{Op: bench.Allreduce, DType: collective.Float32, MinBytes: 8, MaxBytes: 8 * gib}
	for _, tc := range []struct {
		name        string
		opts        bench.Options
		world, here int
		avail       int64
		want        string // "" = accepted
	}{
		{"fits", allreduce, 2, 1, 20 * gib, ""},
		{"fits exactly", allreduce, 2, 1, 16 * gib, ""},
		{"one rank too big", allreduce, 1, 1, 15 * gib,
			"invalid --max-bytes 8GiB: the allreduce buffers take 16 GiB per rank, and this node has 15 GiB available"},
		{"the node's ranks share it", allreduce, 4, 2, 20 * gib,
			"invalid --max-bytes 8GiB: the allreduce buffers take 16 GiB per rank, 32 GiB for the 2 ranks on this node, and this node has 20 GiB available"},
		{"unknown memory: no check", allreduce, 2, 2, 0, ""},
		{"broadcast needs one buffer", bench.Options{Op: bench.Broadcast, DType: collective.Float32, MinBytes: 8, MaxBytes: 8 * gib}, 2, 2, 16 * gib, ""},
		{"empty sweep: no check", bench.Options{Op: bench.Allgather, DType: collective.Float32, MinBytes: 8, MaxBytes: 8}, 4, 4, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := topology.Topology{WorldSize: tc.world, LocalWorldSize: tc.here}
			err := checkMemory("8GiB", tc.opts, topo, tc.avail)
			got := ""
			if err != nil {
				got = err.Error()
				if exitCode(err) != 2 {
					t.Errorf("exit code %d, want 2", exitCode(err))
				}
			}
			if got != tc.want {
				t.Errorf("checkMemory = %q\n want %q", got, tc.want)
			}
		})
	}
	if memAvailable() <= 0 {
		t.Error("memAvailable found no MemAvailable in /proc/meminfo")
	}
}
