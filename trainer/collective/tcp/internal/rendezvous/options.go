package rendezvous

import (
	"errors"
	"fmt"
	"time"

	"github.com/batchkit/batchkit/envvars"
)

// Options configures the TCP backend (collective.Init fills it from its
// Config). A zero Timeout, RendezvousTimeout or Logf takes its default.
type Options struct {
	Rank, Size        int
	MasterAddr        string
	MasterPort        int
	Token             string
	Timeout           time.Duration
	RendezvousTimeout time.Duration
	Logf              func(format string, args ...any)
	// NoShm keeps links between ranks on one host on TCP
	// (BATCHKIT_TCP_SHM=0); see package tcp's shm.go.
	NoShm bool
	// NoMasterAddrCheck: rank 0 does not check that MASTER_ADDR is its
	// own (BATCHKIT_MASTER_ADDR_CHECK=0); see masteraddr.go.
	NoMasterAddrCheck bool

	star *starSpec // set by JoinStar: the rendezvous of another backend
}

// The defaults for Options' zero timeouts (collective.Config re-exports
// them).
const (
	DefaultTimeout           = 30 * time.Minute // PyTorch's default process-group timeout
	DefaultRendezvousTimeout = 5 * time.Minute
)

// WithDefaults checks o and fills in what was left unset. A world of one
// needs no peers, so neither a token nor rank 0's address.
func (o Options) WithDefaults() (Options, error) {
	switch {
	case o.Size < 1:
		return o, fmt.Errorf("world size %d: must be at least 1", o.Size)
	case o.Rank < 0 || o.Rank >= o.Size:
		return o, fmt.Errorf("rank %d out of range for world size %d", o.Rank, o.Size)
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.RendezvousTimeout <= 0 {
		o.RendezvousTimeout = DefaultRendezvousTimeout
	}
	if o.Size == 1 {
		return o, nil
	}
	switch {
	case o.Token == "":
		return o, fmt.Errorf("no job token (set %s)", envvars.Token)
	case o.MasterAddr == "":
		return o, errors.New("no master address (set MASTER_ADDR to rank 0's host)")
	case o.MasterPort <= 0 || o.MasterPort > 65535:
		return o, fmt.Errorf("master port %d out of range 1-65535 (set MASTER_PORT)", o.MasterPort)
	}
	return o, nil
}
