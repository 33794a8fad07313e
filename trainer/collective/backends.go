package collective

import (
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/ccl"
	"github.com/batchkit/batchkit/trainer/collective/mpi"
)

// backendRow is one backend as data, as detect/layers.go's rows are
// launchers: adding a backend is adding its package and a row here.
type backendRow struct {
	kind Kind
	// lib is the library the binary was built against ("" = not built in;
	// the pure-Go tcp backend is always "go").
	lib string
	// notBuilt is the error for asking a binary without it.
	notBuilt error
	// auto: Auto picks this backend (rows are tried in order, then tcp).
	auto func(cfg Config) bool
	// check refuses, before anything is opened, a world the backend cannot join.
	check func(cfg Config) error
	open  func(cfg Config) (backend.Backend, error)
	// selfAtOne: a world of one needs no network (the self backend).
	selfAtOne bool
	// once: the library cannot be initialised again after Close (MPI).
	once bool
	// setup adapts the process once the backend runs (cmd's initComm).
	setup func(getenv topology.Getenv)
	// idleWait: an AllreduceIdle waiting for its peers takes no CPU
	// (IdleWait): the backend implements backend.IdleAllreducer, or
	// every call of it waits so (tcp).
	idleWait bool
}

var backends = []backendRow{
	{
		kind: MPI, lib: mpi.Library, notBuilt: ErrNoMPI,
		// MPI when the launcher offers this binary's library a way to join
		// the world: not Open MPI under srun --mpi=pmi2, say.
		auto:  func(cfg Config) bool { return mpi.Offered(mpi.Library, cfg.Topology, getenvOf(cfg)) },
		check: func(cfg Config) error { return mpi.CheckWireUp(mpi.Library, cfg.Topology, getenvOf(cfg)) },
		open:  openMPI, once: true, setup: mpi.SetupProcess, idleWait: true,
	},
	{
		// Never picked by Auto: the job asks for oneCCL by name. A world
		// of one is a oneCCL communicator too (its conformance at 1 rank).
		kind: CCL, lib: cclLibrary(), notBuilt: ErrNoCCL,
		open: openCCL, setup: mpi.SetupProcess, idleWait: true,
	},
	{kind: TCP, lib: "go", open: openTCP, selfAtOne: true, idleWait: true},
}

func cclLibrary() string {
	if ccl.Built {
		return "oneccl"
	}
	return ""
}

// ErrNoCCL: --backend ccl on a binary built without oneCCL.
var ErrNoCCL = ccl.ErrNotBuilt

func row(k Kind) *backendRow {
	for i := range backends {
		if backends[i].kind == k {
			return &backends[i]
		}
	}
	return nil
}

// rowNamed is the row of a backend's Name() ("self" has none).
func rowNamed(name string) *backendRow { return row(Kind(name)) }

func (r *backendRow) built() bool { return r.lib != "" }

// library names r's library for messages: "MPI (openmpi)".
func (r *backendRow) library() string {
	if r.kind == MPI {
		return "MPI (" + r.lib + ")"
	}
	return string(r.kind)
}

// Built lists the backends compiled into this binary, in the table's order,
// with the library each was built against ("go" for tcp): what
// `batchkit version` reports.
func Built() []BuiltBackend {
	var out []BuiltBackend
	for _, r := range backends {
		if r.built() {
			out = append(out, BuiltBackend{Name: string(r.kind), Library: r.lib})
		}
	}
	return out
}

// BuiltBackend is one backend compiled in.
type BuiltBackend struct {
	Name    string `json:"name"`
	Library string `json:"library"`
}

// Library is the library the backend named name (a Comm's Backend()) was
// built against: "" for self and unknown names.
func Library(name string) string {
	if r := rowNamed(name); r != nil {
		return r.lib
	}
	return ""
}

// IdleWait reports whether an AllreduceIdle of the backend named name (a
// Comm's Backend()) waits for its peers without taking a CPU: tcp's
// goroutine parks in the netpoller whichever call it makes; mpi and ccl
// test a non-blocking call between sleeps (their AllreduceIdle), where
// their Allreduce polls. Only then does a collective made beside compute
// (the trainer's gradient buckets) cost the compute little while it waits
// for the other ranks.
func IdleWait(name string) bool {
	r := rowNamed(name)
	return r != nil && r.idleWait
}

// SetupProcess adapts the whole process to the backend c runs on, where
// its row says so (GOMAXPROCS and SIGABRT for the cgo backends: see
// mpi.SetupProcess). Programs call it once, at their edge.
func SetupProcess(c *Comm, getenv topology.Getenv) {
	if r := rowNamed(c.Backend()); r != nil && r.setup != nil {
		r.setup(getenv)
	}
}
