package collective

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batchkit/batchkit/envsetup/envvars"
	"github.com/batchkit/batchkit/internal/closed"
	"github.com/batchkit/batchkit/topology"
)

// Kind selects a backend. It is a closed set.
type Kind string

const (
	Auto Kind = "auto" // mpi when built with MPI and started by an MPI launcher, else tcp
	MPI  Kind = "mpi"
	TCP  Kind = "tcp"
)

// Kinds lists the valid backends.
var Kinds = []Kind{Auto, MPI, TCP}

// ParseKind reads "auto", "mpi" or "tcp".
func ParseKind(s string) (Kind, error) { return closed.Parse("backend", s, Kinds) }

// Config describes the world to join.
type Config struct {
	Topology topology.Topology
	Backend  Kind // "" means Auto

	// Getenv is the environment the process was started with (for Auto:
	// was an MPI launcher involved?). nil means no variables.
	Getenv topology.Getenv

	// Token authenticates the TCP backend's peers. Empty means
	// ResolveToken(Getenv, Topology), only when the TCP backend is chosen
	// (MPI needs none: Hydra, for one, exposes no job id to derive it from).
	Token string

	// Timeout bounds how long any TCP operation waits on a silent peer
	// before every rank fails (default DefaultTimeout). A peer that dies or
	// closes its connection fails the collective at once, whatever Timeout.
	Timeout time.Duration
	// RendezvousTimeout bounds the start-up (default DefaultRendezvousTimeout).
	RendezvousTimeout time.Duration

	// Fallback forces the Allreduce-based fallbacks for every optional
	// operation, even those the backend implements (tests, debugging).
	Fallback bool

	// Logf receives diagnostics, such as refused connections (default: none).
	Logf func(format string, args ...any)
}

const (
	DefaultTimeout           = 30 * time.Minute // PyTorch's default process-group timeout
	DefaultRendezvousTimeout = 5 * time.Minute
)

// world is the process's one communicator: Init is idempotent.
var world struct {
	sync.Mutex
	comm         *Comm
	mpiFinalized bool // MPI cannot be initialised again in this process
}

// Init joins the world described by cfg. A second call while the first
// communicator is open returns that same communicator (MPI is never
// initialised twice and the world never doubles); asking for a different
// backend or topology then is an error. After Close, Init builds a new
// world, except that MPI cannot be initialised again once finalised.
func Init(cfg Config) (*Comm, error) {
	if err := cfg.Topology.Validate(); err != nil {
		return nil, fmt.Errorf("collective: topology: %w", err)
	}
	world.Lock()
	defer world.Unlock()
	if c := world.comm; c != nil {
		// Auto takes whatever is open: a library that called Init with
		// --backend mpi, then a helper with the default, share one world.
		if cfg.Backend != "" && cfg.Backend != Auto {
			kind, err := choose(cfg)
			if err != nil {
				return nil, err
			}
			if want := backendName(kind, cfg.Topology.WorldSize); want != c.b.Name() {
				return nil, fmt.Errorf("collective: already initialised with the %s backend, cannot switch to %s", c.b.Name(), kind)
			}
		}
		if c.b.Rank() != cfg.Topology.Rank || c.b.Size() != cfg.Topology.WorldSize {
			return nil, fmt.Errorf("collective: already initialised as rank %d of %d, asked for rank %d of %d",
				c.b.Rank(), c.b.Size(), cfg.Topology.Rank, cfg.Topology.WorldSize)
		}
		return c, nil
	}
	kind, err := choose(cfg)
	if err != nil {
		return nil, err
	}
	b, err := open(kind, cfg)
	if err != nil {
		return nil, err
	}
	world.comm = newComm(b, cfg.Topology.LocalRank, cfg.Fallback)
	return world.comm, nil
}

// forget is called by Comm.Close.
func forget(c *Comm) {
	world.Lock()
	defer world.Unlock()
	if world.comm == c {
		world.comm = nil
	}
	if c.b.Name() == "mpi" {
		world.mpiFinalized = true
	}
}

// choose resolves Auto.
func choose(cfg Config) (Kind, error) {
	kind := cfg.Backend
	switch kind {
	case "", Auto:
		// MPI when the launcher offers this binary's library a way to
		// join the world: not Open MPI under srun --mpi=pmi2, say.
		if MPIBuilt != "" && mpiOffered(MPIBuilt, cfg.Topology, getenvOf(cfg)) {
			return MPI, nil
		}
		return TCP, nil
	case MPI:
		if MPIBuilt == "" {
			return "", ErrNoMPI
		}
		if err := checkMPIWireUp(MPIBuilt, cfg.Topology, getenvOf(cfg)); err != nil {
			return "", fmt.Errorf("collective: mpi backend: %w", err)
		}
		return MPI, nil
	case TCP:
		return TCP, nil
	}
	return "", fmt.Errorf("collective: unknown backend %q (want auto, mpi or tcp)", kind)
}

func getenvOf(cfg Config) topology.Getenv {
	if cfg.Getenv == nil {
		return func(string) string { return "" }
	}
	return cfg.Getenv
}

// TokenError: the TCP backend has no job token. It is the user's setup
// (launcher, environment, secret file), not a runtime failure.
type TokenError struct{ Err error }

func (e *TokenError) Error() string { return "collective: tcp backend: " + e.Err.Error() }
func (e *TokenError) Unwrap() error { return e.Err }

// SetupError: the job is set up wrongly (ranks with different tokens or
// world sizes, two processes with one rank, MASTER_ADDR that does not
// resolve, MASTER_PORT taken), not a failure while it ran: retrying the
// same job cannot succeed.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// ErrNoMPI: --backend mpi on a binary built without MPI.
var ErrNoMPI = errors.New("collective: this binary was built without MPI (build it with `make build-mpi MPI=openmpi` or `MPI=mpich`)")

// backendName is the Name() the chosen kind produces.
func backendName(k Kind, size int) string {
	switch {
	case k == MPI:
		return "mpi"
	case size == 1:
		return "self"
	}
	return "tcp"
}

func open(kind Kind, cfg Config) (Backend, error) {
	t := cfg.Topology
	if kind == MPI {
		if world.mpiFinalized {
			return nil, errors.New("collective: MPI was finalised in this process and cannot be initialised again")
		}
		b, err := newMPI(t, getenvOf(cfg))
		if err != nil {
			return nil, fmt.Errorf("collective: mpi backend: %w", err)
		}
		return b, nil
	}
	if t.WorldSize == 1 {
		return selfBackend{}, nil
	}
	token := cfg.Token
	if token == "" {
		var err error
		if token, err = ResolveToken(getenvOf(cfg), t); err != nil {
			return nil, &TokenError{Err: err}
		}
	}
	opts := tcpOptions{
		Rank: t.Rank, Size: t.WorldSize,
		MasterAddr: t.MasterAddr, MasterPort: t.MasterPort,
		Token:   token,
		Timeout: cfg.Timeout, RendezvousTimeout: cfg.RendezvousTimeout,
		Logf:  cfg.Logf,
		NoShm: getenvOf(cfg)("BATCHKIT_TCP_SHM") == "0",
	}
	opts.NoMasterAddrCheck = getenvOf(cfg)(envvars.MasterAddrCheck) == "0"
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.RendezvousTimeout <= 0 {
		opts.RendezvousTimeout = DefaultRendezvousTimeout
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	b, err := newTCP(opts)
	if err != nil {
		return nil, fmt.Errorf("collective: tcp backend: %w", err)
	}
	return b, nil
}

// selfBackend is a world of one: every collective is a copy.
type selfBackend struct{}

func (selfBackend) Name() string { return "self" }
func (selfBackend) Rank() int    { return 0 }
func (selfBackend) Size() int    { return 1 }
func (selfBackend) Close() error { return nil }
func (selfBackend) Allreduce(send, recv Buffer, _ Op) error {
	if !send.Same(recv) {
		copy(recv.Bytes(), send.Bytes())
	}
	return nil
}
func (selfBackend) Broadcast(Buffer, int) error { return nil }
func (selfBackend) Allgather(send, recv Buffer) error {
	copy(recv.Bytes(), send.Bytes())
	return nil
}
func (selfBackend) ReduceScatter(send, recv Buffer, _ Op) error {
	copy(recv.Bytes(), send.Bytes())
	return nil
}
func (selfBackend) Barrier() error { return nil }
