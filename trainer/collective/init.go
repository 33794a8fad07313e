package collective

import (
	"errors"
	"fmt"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"sync"
	"time"

	"github.com/batchkit/batchkit/envsetup/envvars"
	"github.com/batchkit/batchkit/internal/closed"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective/mpi"
	"github.com/batchkit/batchkit/trainer/collective/tcp"
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
	// tcp.ResolveToken(Getenv, Topology), only when the TCP backend is chosen
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
	DefaultTimeout           = tcp.DefaultTimeout // PyTorch's default process-group timeout
	DefaultRendezvousTimeout = tcp.DefaultRendezvousTimeout
)

// What the mpi backend reports, under the names programs use.
const MPIBuilt = mpi.Library // the MPI library this binary was built against, "" for none

var ErrNoMPI = mpi.ErrNotBuilt // --backend mpi on a binary built without MPI

type (
	// MPIError is a failed MPI call.
	MPIError = mpi.Error
	// WorldError: the MPI library cannot join the world the launcher
	// started. It is the user's setup, not a runtime failure.
	WorldError = mpi.WorldError
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
		if MPIBuilt != "" && mpi.Offered(MPIBuilt, cfg.Topology, getenvOf(cfg)) {
			return MPI, nil
		}
		return TCP, nil
	case MPI:
		if MPIBuilt == "" {
			return "", ErrNoMPI
		}
		if err := mpi.CheckWireUp(MPIBuilt, cfg.Topology, getenvOf(cfg)); err != nil {
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

func open(kind Kind, cfg Config) (backend.Backend, error) {
	switch {
	case kind == MPI:
		return openMPI(cfg)
	case cfg.Topology.WorldSize == 1:
		return selfBackend{}, nil
	}
	return openTCP(cfg)
}

func openMPI(cfg Config) (backend.Backend, error) {
	if world.mpiFinalized {
		return nil, errors.New("collective: MPI was finalised in this process and cannot be initialised again")
	}
	b, err := mpi.New(cfg.Topology, getenvOf(cfg))
	if err != nil {
		return nil, fmt.Errorf("collective: mpi backend: %w", err)
	}
	return b, nil
}

// openTCP resolves the job token (tcp.ResolveToken) unless cfg has one and
// joins the TCP world; tcp.New fills in the zero timeouts and Logf.
func openTCP(cfg Config) (backend.Backend, error) {
	t := cfg.Topology
	token := cfg.Token
	if token == "" {
		var err error
		if token, err = tcp.ResolveToken(getenvOf(cfg), t); err != nil {
			return nil, &TokenError{Err: err}
		}
	}
	b, err := tcp.New(tcp.Options{
		Rank: t.Rank, Size: t.WorldSize,
		MasterAddr: t.MasterAddr, MasterPort: t.MasterPort,
		Token:   token,
		Timeout: cfg.Timeout, RendezvousTimeout: cfg.RendezvousTimeout,
		Logf:              cfg.Logf,
		NoShm:             getenvOf(cfg)("BATCHKIT_TCP_SHM") == "0",
		NoMasterAddrCheck: getenvOf(cfg)(envvars.MasterAddrCheck) == "0",
	})
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
func (selfBackend) Allreduce(send, recv backend.Buffer, _ Op) error {
	if !send.Same(recv) {
		copy(recv.Bytes(), send.Bytes())
	}
	return nil
}
func (selfBackend) Broadcast(backend.Buffer, int) error { return nil }
func (selfBackend) Allgather(send, recv backend.Buffer) error {
	copy(recv.Bytes(), send.Bytes())
	return nil
}
func (selfBackend) ReduceScatter(send, recv backend.Buffer, _ Op) error {
	copy(recv.Bytes(), send.Bytes())
	return nil
}
func (selfBackend) Barrier() error { return nil }
