package local

import (
	"fmt"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/internal/freeport"
	"github.com/batchkit/batchkit/topology"
)

// MasterAddr is where rank 0 listens: every rank is on this machine.
const MasterAddr = "127.0.0.1"

// RankTopology is the placement of rank of n ranks, all on this machine.
func RankTopology(rank, n, masterPort int) topology.Topology {
	return topology.Topology{
		Launcher:       topology.Torchrun,
		Rank:           rank,
		WorldSize:      n,
		LocalRank:      rank,
		LocalWorldSize: n,
		NodeRank:       0,
		NumNodes:       1,
		Hosts:          []string{MasterAddr},
		MasterAddr:     MasterAddr,
		MasterPort:     masterPort,
	}
}

// rankEnv is one rank's environment: base with the torchrun contract of t
// and the attempt's variables set over any inherited values
// (envsetup.RankEnv decides; nothing is sourced per rank here).
func rankEnv(base []string, t topology.Topology, a envsetup.Attempt) []string {
	ch, _ := envsetup.RankEnv(envsetup.RankInput{Topology: t, Attempt: &a, Environ: base})
	return envsetup.Merge(base, ch)
}

func (l *launch) attempt() envsetup.Attempt {
	return envsetup.Attempt{Token: l.token, RunID: l.runID, Restart: l.restart, MaxRestarts: l.opts.MaxRestarts}
}

// freePort asks the kernel for a free TCP port on MasterAddr.
func freePort() (int, error) {
	port, err := freeport.On(MasterAddr)
	if err != nil {
		return 0, fmt.Errorf("choosing MASTER_PORT: %w", err)
	}
	return port, nil
}
