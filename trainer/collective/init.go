package collective

import (
	"fmt"
	"sync"
	"time"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/closed"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/ccl"
	"github.com/batchkit/batchkit/trainer/collective/mpi"
	"github.com/batchkit/batchkit/trainer/collective/tcp"
)

// Kind selects a backend. It is a closed set: Auto and the rows of
// backends (backends.go).
type Kind string

const (
	Auto Kind = "auto" // mpi when built with MPI and started by an MPI launcher, else tcp
	MPI  Kind = "mpi"
	CCL  Kind = "ccl"
	TCP  Kind = "tcp"
)

// Kinds lists the valid backends.
var Kinds = func() []Kind {
	ks := []Kind{Auto}
	for _, r := range backends {
		ks = append(ks, r.kind)
	}
	return ks
}()

// ParseKind reads "auto" or a backend's name.
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
	comm      *Comm
	finalized map[Kind]bool // backends that cannot be initialised again in this process (MPI)
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
	if r := rowNamed(c.b.Name()); r != nil && r.once {
		if world.finalized == nil {
			world.finalized = map[Kind]bool{}
		}
		world.finalized[r.kind] = true
	}
}

// choose resolves Auto: the first row that offers itself, else tcp. An
// explicit choice must be built in and pass its row's check.
func choose(cfg Config) (Kind, error) {
	kind := cfg.Backend
	if kind == "" || kind == Auto {
		for _, r := range backends {
			if r.built() && r.auto != nil && r.auto(cfg) {
				return r.kind, nil
			}
		}
		return TCP, nil
	}
	r := row(kind)
	switch {
	case r == nil:
		return "", fmt.Errorf("collective: unknown backend %q (want one of %s)", kind, closed.Join(Kinds))
	case !r.built():
		return "", r.notBuilt
	case r.check != nil:
		if err := r.check(cfg); err != nil {
			return "", fmt.Errorf("collective: %s backend: %w", kind, err)
		}
	}
	return kind, nil
}

func getenvOf(cfg Config) topology.Getenv {
	if cfg.Getenv == nil {
		return func(string) string { return "" }
	}
	return cfg.Getenv
}

// TokenError: the rendezvous (tcp and ccl backends) has no job token. It
// is the user's setup (launcher, environment, secret file), not a runtime
// failure.
type TokenError struct{ Err error }

func (e *TokenError) Error() string { return e.Err.Error() }
func (e *TokenError) Unwrap() error { return e.Err }

// backendName is the Name() the chosen kind produces.
func backendName(k Kind, size int) string {
	if r := row(k); r != nil && r.selfAtOne && size == 1 {
		return "self"
	}
	return string(k)
}

func open(kind Kind, cfg Config) (backend.Backend, error) {
	r := row(kind)
	if r.selfAtOne && cfg.Topology.WorldSize == 1 {
		return selfBackend{}, nil
	}
	if world.finalized[kind] {
		return nil, fmt.Errorf("collective: %s was finalised in this process and cannot be initialised again", r.library())
	}
	b, err := r.open(cfg)
	if err != nil {
		return nil, fmt.Errorf("collective: %s backend: %w", kind, err)
	}
	return b, nil
}

func openMPI(cfg Config) (backend.Backend, error) { return mpi.New(cfg.Topology, getenvOf(cfg)) }

// resolveToken is cfg's token, or tcp.ResolveToken's.
func resolveToken(cfg Config) (string, error) {
	if cfg.Token != "" {
		return cfg.Token, nil
	}
	token, err := tcp.ResolveToken(getenvOf(cfg), cfg.Topology)
	if err != nil {
		return "", &TokenError{Err: err}
	}
	return token, nil
}

// rendezvousOptions is the meeting at MASTER_ADDR:MASTER_PORT that the tcp
// and ccl backends both hold.
func rendezvousOptions(cfg Config, token string) tcp.Options {
	t := cfg.Topology
	return tcp.Options{
		Rank: t.Rank, Size: t.WorldSize,
		MasterAddr: t.MasterAddr, MasterPort: t.MasterPort,
		Token:   token,
		Timeout: cfg.Timeout, RendezvousTimeout: cfg.RendezvousTimeout,
		Logf:              cfg.Logf,
		NoShm:             getenvOf(cfg)(envvars.TCPShm) == "0",
		NoMasterAddrCheck: getenvOf(cfg)(envvars.MasterAddrCheck) == "0",
	}
}

func openCCL(cfg Config) (backend.Backend, error) {
	token, err := resolveToken(cfg)
	if err != nil {
		return nil, err
	}
	cpus, _ := envsetup.ReadCPUs("/") // unknown CPUs: nothing checked against them
	return ccl.New(ccl.Options{Topology: cfg.Topology, Getenv: getenvOf(cfg), CPUs: cpus,
		Rendezvous: rendezvousOptions(cfg, token)})
}

// openTCP resolves the job token (tcp.ResolveToken) unless cfg has one and
// joins the TCP world; tcp.New fills in the zero timeouts and Logf.
func openTCP(cfg Config) (backend.Backend, error) {
	token, err := resolveToken(cfg)
	if err != nil {
		return nil, err
	}
	return tcp.New(rendezvousOptions(cfg, token))
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
