package tcp

import "github.com/batchkit/batchkit/trainer/collective/tcp/internal/rendezvous"

// The package's API that lives with the rendezvous (internal/rendezvous),
// which needs it as well as New: the options, and the star, which is the
// rendezvous alone for a backend whose data moves elsewhere (ccl).

// Options configures the TCP backend (collective.Init fills it from its
// Config). A zero Timeout, RendezvousTimeout or Logf takes its default.
type Options = rendezvous.Options

// The defaults for Options' zero timeouts (collective.Config re-exports
// them).
const (
	DefaultTimeout           = rendezvous.DefaultTimeout
	DefaultRendezvousTimeout = rendezvous.DefaultRendezvousTimeout
)

// Star is one rank's end of a star: rank 0 holds a connection to every
// rank, the others one to rank 0.
type Star = rendezvous.Star

// LostError: a rank of the job died (or closed its connection without
// closing its communicator) while this one still needed it.
type LostError = rendezvous.LostError

// JoinStar meets at MASTER_ADDR:MASTER_PORT under backendName. Rank 0 calls
// payload once every rank has joined and sends its result to every rank;
// every rank (rank 0 too, concurrently) then calls step with it. JoinStar
// returns on every rank once every step has succeeded, or an error on
// every rank naming the first failure. A world of one runs payload and
// step locally.
func JoinStar(opts Options, backendName string, payload func() ([]byte, error), step func([]byte) error) (*Star, error) {
	return rendezvous.JoinStar(opts, backendName, payload, step)
}
