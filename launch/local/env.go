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

// Profile is what a site profile adds to every rank (batchkit run
// --profile): its scripts' changes, sourced once by the caller, and its
// [env] variables, both under the user's values (envsetup.RankEnv).
type Profile struct {
	Sourced envsetup.Changes
	Vars    map[string]string
}

// rankEnv is one rank's environment: base (the user's, before any script)
// with p's layers, then the torchrun contract of t and the attempt's
// variables over any inherited values (envsetup.RankEnv decides).
func rankEnv(base []string, p Profile, t topology.Topology, a envsetup.Attempt) []string {
	ch, _ := envsetup.RankEnv(envsetup.RankInput{Topology: t, Attempt: &a, Environ: base, Sourced: p.Sourced, Vars: p.Vars})
	return envsetup.Merge(base, ch)
}

// envAttempt is what the ranks are told about this attempt.
func (r *runner) envAttempt() envsetup.Attempt {
	return envsetup.Attempt{Token: r.token, RunID: r.runID, Restart: r.restart, MaxRestarts: r.MaxRestarts}
}

// freePort finds a free TCP port on MasterAddr below the kernel's
// ephemeral range: in that range any outgoing connection on the node can
// take it before rank 0 listens (seen when tests ran beside each other).
func freePort() (int, error) {
	port, err := freeport.BelowEphemeral(MasterAddr)
	if err != nil {
		return 0, fmt.Errorf("choosing MASTER_PORT: %w", err)
	}
	return port, nil
}
