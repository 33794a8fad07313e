package local

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/envsetup/envvars"
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

// Attempt is what the ranks of one attempt share besides the topology.
type Attempt struct {
	Token       string // envvars.Token: new in every attempt
	RunID       string // envvars.RunID: the same in every attempt, as torchrun's
	Restart     int    // envvars.RestartCount: 0 in the first attempt
	MaxRestarts int    // envvars.MaxRestarts
}

// RankEnv is one rank's environment: base with the torchrun contract of t
// and a's variables set, replacing any inherited values.
func RankEnv(base []string, t topology.Topology, a Attempt) []string {
	set := t.TorchrunEnv()
	set[envvars.Token] = a.Token
	set[envvars.RunID] = a.RunID
	set[envvars.RestartCount] = strconv.Itoa(a.Restart)
	set[envvars.MaxRestarts] = strconv.Itoa(a.MaxRestarts)
	return topology.MergeEnviron(base, set)
}

func (l *launch) attempt() Attempt {
	return Attempt{Token: l.token, RunID: l.runID, Restart: l.restart, MaxRestarts: l.opts.MaxRestarts}
}

// lookupEnv finds key in an os.Environ-style list; later entries win.
func lookupEnv(environ []string, key string) string {
	v := ""
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// NewToken is a fresh job token for envvars.Token: 32 random bytes,
// hex-encoded. batchkit run and batchkit mpirun generate one per launch
// unless envvars.Token is already set.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating %s: %w", envvars.Token, err)
	}
	return hex.EncodeToString(b), nil
}

// newToken is NewToken under the name this package's launcher uses.
func newToken() (string, error) { return NewToken() }

// freePort asks the kernel for a free TCP port on MasterAddr.
func freePort() (int, error) {
	port, err := freeport.On(MasterAddr)
	if err != nil {
		return 0, fmt.Errorf("choosing MASTER_PORT: %w", err)
	}
	return port, nil
}
