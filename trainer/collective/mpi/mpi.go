//go:build (mpi || mpich) && !(mpi && mpich)

package mpi

// The MPI backend: cgo bindings to the MPI library the binary is built
// against (tag mpi = Open MPI, tag mpich = MPICH or ABI-compatible Intel MPI).
//
// MPI handles are pointers in Open MPI and ints in MPICH, and MPI_FLOAT,
// MPI_SUM, MPI_COMM_WORLD, ... are macros cgo cannot use, so Go never touches
// a handle or a predefined object: the small static C functions below take
// int codes (the values of DType and Op) and a communicator carried as a
// uintptr_t, and each makes exactly one MPI call (the collectives loop only
// to chunk counts above INT_MAX). One cgo call per collective keeps the
// overhead per call to the cgo transition and a mutex.
//
// Go memory is handed to MPI only for the duration of a blocking call: no
// non-blocking MPI. Short calls run on the calling goroutine's thread and
// keep nothing (hence #cgo noescape / nocallback on bk_call); large ones run
// on a C thread while the goroutine waits (see mpiHandoff), their buffers
// pinned with runtime.Pinner for that time. Buffers
// travel as char *: cgo checks a pointer argument for Go pointers inside
// the memory it points to only when the pointee type could hold one, and for
// *C.char it cannot, which saves that runtime check (~40 ns) on every call.
// Buffers only ever view float32/float64 slices, which hold no pointers.
//
// Why the worker thread, and what was measured: docs/mpi-backend.md.

/*
#cgo mpi pkg-config: ompi
#cgo mpi CFLAGS: -DBK_WANT_OPEN_MPI
#cgo mpich pkg-config: mpich
#cgo mpich CFLAGS: -DBK_WANT_MPICH
#cgo noescape bk_call
#cgo nocallback bk_call
#cgo nocallback bk_start_worker
#cgo nocallback bk_join_worker
#cgo nocallback bk_wait_result

#include <mpi.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#if defined(BK_WANT_OPEN_MPI) && !defined(OPEN_MPI)
#error "collective: built with -tags mpi (Open MPI) but mpi.h is not Open MPI's: check pkg-config ompi"
#endif
#if defined(BK_WANT_MPICH) && defined(OPEN_MPI)
#error "collective: built with -tags mpich (MPICH) but mpi.h is Open MPI's: check pkg-config mpich"
#endif

// Go's float32 and float64 travel as MPI_FLOAT and MPI_DOUBLE.
_Static_assert(sizeof(float) == 4, "collective: C float is not 4 bytes, MPI_FLOAT cannot carry Go float32");
_Static_assert(sizeof(double) == 8, "collective: C double is not 8 bytes, MPI_DOUBLE cannot carry Go float64");
_Static_assert(sizeof(MPI_Comm) <= sizeof(uintptr_t), "collective: MPI_Comm does not fit in uintptr_t");

// The values of backend.DType and backend.Op (asserted in Go).
enum { BK_F32 = 1, BK_F64 = 2 };
enum { BK_SUM = 1, BK_MAX = 3, BK_MIN = 4 };
enum { BK_THREAD_SERIALIZED = MPI_THREAD_SERIALIZED, BK_MAX_ERROR_STRING = MPI_MAX_ERROR_STRING };

// Unknown codes map to the null handles so that MPI itself rejects them
// (MPI_ERR_TYPE, MPI_ERR_OP) instead of this file guessing.
static inline MPI_Datatype bk_type(int t) {
	switch (t) {
	case BK_F32: return MPI_FLOAT;
	case BK_F64: return MPI_DOUBLE;
	}
	return MPI_DATATYPE_NULL;
}
static inline size_t bk_size(int t) { return t == BK_F64 ? 8 : 4; }
// Max and Min are Go's math.Max and math.Min, not MPI_MAX and MPI_MIN: those
// leave NaN and -0 vs +0 to operand order (x > y ? x : y), which differs
// between ranks, so ranks could end with different bits. Here +Inf beats NaN
// beats everything for max (-Inf for min), +0 beats -0 (-0 for min), and a
// NaN result is always math.NaN()'s bits, as in the TCP backend (backend.Reduce).
static MPI_Op bk_max_op = MPI_OP_NULL, bk_min_op = MPI_OP_NULL;

static inline double bk_nan64(void) { uint64_t u = 0x7FF8000000000001ULL; double d; memcpy(&d, &u, 8); return d; }
static inline float bk_nan32(void) { uint32_t u = 0x7FC00000U; float f; memcpy(&f, &u, 4); return f; }

// Equal values differ only as -0 and +0: max keeps x unless x is -0
// (signbit set), min keeps x unless x is +0.
static inline double bk_max64(double x, double y) {
	if (x > y) return x;
	if (y > x) return y;
	if (x == INFINITY || y == INFINITY) return INFINITY;
	if (x != x || y != y) return bk_nan64();
	return signbit(x) ? y : x;
}
static inline double bk_min64(double x, double y) {
	if (x < y) return x;
	if (y < x) return y;
	if (x == -INFINITY || y == -INFINITY) return -INFINITY;
	if (x != x || y != y) return bk_nan64();
	return signbit(x) ? x : y;
}
static inline float bk_max32(float x, float y) {
	if (x > y) return x;
	if (y > x) return y;
	if (x == INFINITY || y == INFINITY) return INFINITY;
	if (x != x || y != y) return bk_nan32();
	return signbit(x) ? y : x;
}
static inline float bk_min32(float x, float y) {
	if (x < y) return x;
	if (y < x) return y;
	if (x == -INFINITY || y == -INFINITY) return -INFINITY;
	if (x != x || y != y) return bk_nan32();
	return signbit(x) ? x : y;
}

// MPI_User_function: inout[i] = in[i] op inout[i]. Only MPI_FLOAT and
// MPI_DOUBLE reach these (bk_type).
static void bk_max_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
	int n = *len;
	if (*dt == MPI_FLOAT) {
		float *a = in, *b = inout;
		for (int i = 0; i < n; i++) b[i] = bk_max32(a[i], b[i]);
	} else {
		double *a = in, *b = inout;
		for (int i = 0; i < n; i++) b[i] = bk_max64(a[i], b[i]);
	}
}
static void bk_min_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
	int n = *len;
	if (*dt == MPI_FLOAT) {
		float *a = in, *b = inout;
		for (int i = 0; i < n; i++) b[i] = bk_min32(a[i], b[i]);
	} else {
		double *a = in, *b = inout;
		for (int i = 0; i < n; i++) b[i] = bk_min64(a[i], b[i]);
	}
}

// bk_create_ops makes the two ops (commutative) once MPI is initialised.
static int bk_create_ops(void) {
	int rc = MPI_Op_create(bk_max_fn, 1, &bk_max_op);
	if (rc != MPI_SUCCESS)
		return rc;
	rc = MPI_Op_create(bk_min_fn, 1, &bk_min_op);
	if (rc != MPI_SUCCESS) {
		MPI_Op_free(&bk_max_op);
		bk_max_op = MPI_OP_NULL;
	}
	return rc;
}
static int bk_free_ops(void) {
	int rc = MPI_SUCCESS, rc2 = MPI_SUCCESS;
	if (bk_max_op != MPI_OP_NULL)
		rc = MPI_Op_free(&bk_max_op);
	if (bk_min_op != MPI_OP_NULL)
		rc2 = MPI_Op_free(&bk_min_op);
	bk_max_op = bk_min_op = MPI_OP_NULL;
	return rc != MPI_SUCCESS ? rc : rc2;
}

static inline MPI_Op bk_op(int op) {
	switch (op) {
	case BK_SUM: return MPI_SUM;
	case BK_MAX: return bk_max_op;
	case BK_MIN: return bk_min_op;
	}
	return MPI_OP_NULL;
}
static inline MPI_Comm bk_comm(uintptr_t h) { return (MPI_Comm)h; }

// ---- set-up and tear-down: one MPI call each, so errors name the call.

static uintptr_t bk_comm_world(void) { return (uintptr_t)MPI_COMM_WORLD; }
static int bk_errors_return(uintptr_t h) { return MPI_Comm_set_errhandler(bk_comm(h), MPI_ERRORS_RETURN); }
static int bk_comm_rank(uintptr_t h, int *r) { return MPI_Comm_rank(bk_comm(h), r); }
static int bk_comm_size(uintptr_t h, int *s) { return MPI_Comm_size(bk_comm(h), s); }
static int bk_comm_dup(uintptr_t h, uintptr_t *out) {
	MPI_Comm c = MPI_COMM_NULL;
	int rc = MPI_Comm_dup(bk_comm(h), &c);
	*out = (uintptr_t)c;
	return rc;
}
static int bk_comm_free(uintptr_t *h) {
	MPI_Comm c = bk_comm(*h);
	int rc = MPI_Comm_free(&c);
	*h = (uintptr_t)c;
	return rc;
}
static int bk_init_thread(int *provided) { return MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, provided); }

// ---- the collectives. count is in elements; max is the largest count one
// MPI call may carry (INT_MAX; lowered by tests to exercise the chunking).

static int bk_allreduce(uintptr_t h, char *send, char *recv, int64_t count, int t, int op, int inplace, int64_t max) {
	MPI_Comm c = bk_comm(h);
	MPI_Datatype dt = bk_type(t);
	MPI_Op o = bk_op(op);
	if (count <= max)
		return MPI_Allreduce(inplace ? MPI_IN_PLACE : send, recv, (int)count, dt, o, c);
	size_t es = bk_size(t);
	for (int64_t off = 0; off < count; off += max) {
		int64_t n = count - off < max ? count - off : max;
		void *s = inplace ? MPI_IN_PLACE : (void *)(send + (size_t)off * es);
		int rc = MPI_Allreduce(s, recv + (size_t)off * es, (int)n, dt, o, c);
		if (rc != MPI_SUCCESS)
			return rc;
	}
	return MPI_SUCCESS;
}

static int bk_bcast(uintptr_t h, char *buf, int64_t count, int t, int root, int64_t max) {
	MPI_Comm c = bk_comm(h);
	MPI_Datatype dt = bk_type(t);
	if (count <= max)
		return MPI_Bcast(buf, (int)count, dt, root, c);
	size_t es = bk_size(t);
	for (int64_t off = 0; off < count; off += max) {
		int64_t n = count - off < max ? count - off : max;
		int rc = MPI_Bcast(buf + (size_t)off * es, (int)n, dt, root, c);
		if (rc != MPI_SUCCESS)
			return rc;
	}
	return MPI_SUCCESS;
}

// Per-rank counts: the Go side has checked that they fit in an int.
static int bk_allgather(uintptr_t h, char *send, char *recv, int count, int t) {
	return MPI_Allgather(send, count, bk_type(t), recv, count, bk_type(t), bk_comm(h));
}
static int bk_reduce_scatter_block(uintptr_t h, char *send, char *recv, int count, int t, int op) {
	return MPI_Reduce_scatter_block(send, recv, count, bk_type(t), bk_op(op), bk_comm(h));
}

// bk_call runs one collective, named by kind (the values of mpiKind). arg is
// the in-place flag for allreduce and the root for broadcast.
enum { BK_ALLREDUCE = 1, BK_BCAST = 2, BK_ALLGATHER = 3, BK_REDUCE_SCATTER = 4, BK_BARRIER = 5 };
static int bk_call(int kind, uintptr_t h, char *send, char *recv, int64_t count, int t, int op, int arg, int64_t max) {
	switch (kind) {
	case BK_ALLREDUCE: return bk_allreduce(h, send, recv, count, t, op, arg, max);
	case BK_BCAST: return bk_bcast(h, send, count, t, arg, max);
	case BK_ALLGATHER: return bk_allgather(h, send, recv, (int)count, t);
	case BK_REDUCE_SCATTER: return bk_reduce_scatter_block(h, send, recv, (int)count, t, op);
	case BK_BARRIER: return MPI_Barrier(bk_comm(h));
	}
	return MPI_ERR_ARG;
}

// ---- the worker: one C thread that makes the large calls (see mpiHandoff).
// The Go side fills bk_w while the thread waits, then writes one byte to the
// request pipe; the thread makes the call and writes its int32 result to
// the done pipe. Both sides of a call are plain memory and pipe traffic, no
// cgo call (see mpiWorker for why). The Go side holds mpiState's lock from
// the request to the result, so there is at most one call in flight and
// MPI still sees serialised calls.

// Not static: Go writes the requests into it, and cgo reaches only C
// symbols with external linkage (hence the prefixed name).
struct {
	pthread_t th;
	int req_fd;  // the thread reads requests here (blocking) till end of file
	int done_fd; // and writes each call's int32 result here
	int kind, t, op, arg;
	// The buffers travel as integers: Go storing a pointer into C memory
	// runs a write barrier on the slot's old value, a buffer the GC may
	// have freed since ("found bad pointer in Go heap").
	uintptr_t h, send, recv;
	int64_t count, max, iters;
} batchkit_mpi_worker;
#define bk_w batchkit_mpi_worker

static void *bk_worker(void *unused) {
	(void)unused;
	for (;;) {
		char b;
		ssize_t n = read(bk_w.req_fd, &b, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != 1)
			return NULL;
		int rc = MPI_SUCCESS;
		for (int64_t i = 0; i < bk_w.iters && rc == MPI_SUCCESS; i++)
			rc = bk_call(bk_w.kind, bk_w.h, (char *)bk_w.send, (char *)bk_w.recv, bk_w.count, bk_w.t, bk_w.op, bk_w.arg, bk_w.max);
		int32_t r = rc;
		while (write(bk_w.done_fd, &r, sizeof r) < 0 && errno == EINTR)
			;
	}
}

// bk_start_worker starts the thread with every signal blocked (signals
// belong to Go's threads). It returns 0 or the error number.
static int bk_start_worker(int req_fd, int done_fd) {
	bk_w.req_fd = req_fd, bk_w.done_fd = done_fd;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int err = pthread_create(&bk_w.th, NULL, bk_worker, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

// bk_wait_result reads a call's result from the done pipe, waiting with
// poll: the Go side's fallback when its own read failed. A result it cannot
// read becomes MPI_ERR_INTERN.
static int bk_wait_result(int fd) {
	int32_t r = MPI_ERR_INTERN;
	char buf[sizeof r];
	for (size_t got = 0; got < sizeof r;) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return MPI_ERR_INTERN;
		ssize_t n = read(fd, buf + got, sizeof r - got);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return MPI_ERR_INTERN;
		if (n > 0)
			got += n;
	}
	memcpy(&r, buf, sizeof r);
	return r;
}

// bk_join_worker waits for the thread to end (after the Go side has closed
// the request pipe).
static void bk_join_worker(void) { pthread_join(bk_w.th, NULL); }

// bk_abort is what an MPI library does on a fatal transport error (tests).
static void bk_abort(void) { abort(); }

// ---- errors.

static int bk_error_string(int rc, char *buf) {
	int len = 0;
	if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
		len = 0;
	if (len < 0)
		len = 0;
	if (len >= BK_MAX_ERROR_STRING)
		len = BK_MAX_ERROR_STRING - 1;
	buf[len] = 0;
	return len;
}

#define BK_CLASS(x) case x: return #x;
static const char *bk_class_name(int rc) {
	int cls = rc;
	if (MPI_Error_class(rc, &cls) != MPI_SUCCESS)
		return "";
	switch (cls) {
	BK_CLASS(MPI_ERR_BUFFER) BK_CLASS(MPI_ERR_COUNT) BK_CLASS(MPI_ERR_TYPE)
	BK_CLASS(MPI_ERR_TAG) BK_CLASS(MPI_ERR_COMM) BK_CLASS(MPI_ERR_RANK)
	BK_CLASS(MPI_ERR_REQUEST) BK_CLASS(MPI_ERR_ROOT) BK_CLASS(MPI_ERR_GROUP)
	BK_CLASS(MPI_ERR_OP) BK_CLASS(MPI_ERR_TOPOLOGY) BK_CLASS(MPI_ERR_DIMS)
	BK_CLASS(MPI_ERR_ARG) BK_CLASS(MPI_ERR_UNKNOWN) BK_CLASS(MPI_ERR_TRUNCATE)
	BK_CLASS(MPI_ERR_OTHER) BK_CLASS(MPI_ERR_INTERN) BK_CLASS(MPI_ERR_IN_STATUS)
	BK_CLASS(MPI_ERR_PENDING) BK_CLASS(MPI_ERR_KEYVAL) BK_CLASS(MPI_ERR_NO_MEM)
	BK_CLASS(MPI_ERR_INFO) BK_CLASS(MPI_ERR_INFO_KEY) BK_CLASS(MPI_ERR_INFO_VALUE)
	BK_CLASS(MPI_ERR_INFO_NOKEY) BK_CLASS(MPI_ERR_SPAWN) BK_CLASS(MPI_ERR_PORT)
	BK_CLASS(MPI_ERR_SERVICE) BK_CLASS(MPI_ERR_NAME) BK_CLASS(MPI_ERR_WIN)
	BK_CLASS(MPI_ERR_SIZE) BK_CLASS(MPI_ERR_DISP) BK_CLASS(MPI_ERR_BASE)
	BK_CLASS(MPI_ERR_LOCKTYPE) BK_CLASS(MPI_ERR_UNSUPPORTED_OPERATION)
#ifdef MPI_ERR_PROC_ABORTED
	BK_CLASS(MPI_ERR_PROC_ABORTED)
#endif
#ifdef MPI_ERR_VALUE_TOO_LARGE
	BK_CLASS(MPI_ERR_VALUE_TOO_LARGE)
#endif
#ifdef MPIX_ERR_PROC_FAILED
	BK_CLASS(MPIX_ERR_PROC_FAILED)
#endif
#ifdef MPIX_ERR_REVOKED
	BK_CLASS(MPIX_ERR_REVOKED)
#endif
	}
	return "";
}
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"math"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/batchkit/batchkit/topology"
)

// The C side switches on the values of DType and Op: a compile error here
// means the two lists have drifted apart.
var (
	_ = [1]struct{}{}[int(C.BK_F32)-int(backend.Float32)]
	_ = [1]struct{}{}[int(C.BK_F64)-int(backend.Float64)]
	_ = [1]struct{}{}[int(C.BK_SUM)-int(backend.Sum)]
	_ = [1]struct{}{}[int(C.BK_MAX)-int(backend.Max)]
	_ = [1]struct{}{}[int(C.BK_MIN)-int(backend.Min)]
)

// The hand-over passes buffers to the worker as integers, never as Go
// pointers stored in C memory: such a store runs the GC's write barrier on
// the slot's old value, a buffer the collector may have freed since
// ("found bad pointer in Go heap", once in CI). A compile error here means
// a buffer field became a pointer.
var _ = func() (C.uintptr_t, C.uintptr_t) { return C.batchkit_mpi_worker.send, C.batchkit_mpi_worker.recv }

// mpiKind names a collective for bk_call and the worker.
type mpiKind C.int

const (
	mpiAllreduce     mpiKind = C.BK_ALLREDUCE
	mpiBcast         mpiKind = C.BK_BCAST
	mpiAllgather     mpiKind = C.BK_ALLGATHER
	mpiReduceScatter mpiKind = C.BK_REDUCE_SCATTER
	mpiBarrier       mpiKind = C.BK_BARRIER
)

var mpiCallNames = [...]string{
	mpiAllreduce: "MPI_Allreduce", mpiBcast: "MPI_Bcast",
	mpiAllgather: "MPI_Allgather", mpiReduceScatter: "MPI_Reduce_scatter_block", mpiBarrier: "MPI_Barrier",
}

// mpiState is the process-wide MPI state. Its mutex is held around every
// MPI call: MPI_THREAD_SERIALIZED allows calls from any thread (goroutines
// migrate between OS threads, so FUNNELED would not do) but never two at
// once, whichever communicator they use.
var mpiState struct {
	sync.Mutex
	owned     bool // this package called MPI_Init_thread: the last Close finalises
	open      int  // backends not yet closed
	initCalls int  // MPI_Init_thread calls (tests: MPI is initialised once)
	finalized int  // MPI_Finalize calls (tests: once)

	worker    *mpiWorker // started by the first hand-over
	workerOff bool       // it could not be started: calls stay on their callers' threads
	handoffs  int        // calls the worker made (tests)

	newest *mpiBackend // the backend New made last (tests: the one under a Comm)
}

// mpiMaxCount is the largest element count of one MPI call (MPI counts are
// C ints). Tests lower it to exercise the chunking.
var mpiMaxCount int64 = math.MaxInt32

type mpiBackend struct {
	comm       C.uintptr_t // our duplicate of MPI_COMM_WORLD
	closed     bool        // under mpiState's lock
	rank, size int
	handoffAt  int       // calls moving at least this many bytes run on the worker (mpiHandoffAt)
	lastYield  time.Time // under mpiState's lock
}

// New joins the MPI world: MPI initialised (unless the program did it),
// the world checked against the launcher's, and a communicator of our own.
// It changes no process-wide state beyond MPI's own: see SetupProcess
// for what a program using this backend should do.
func New(t topology.Topology, getenv topology.Getenv) (backend.Backend, error) {
	handoffAt, err := mpiHandoffAt(getenv)
	if err != nil {
		return nil, err
	}
	mpiState.Lock()
	defer mpiState.Unlock()
	provided, justInit, err := mpiInit()
	if err != nil {
		return nil, err
	}
	m, unanimous, err := mpiJoin(t, provided)
	if err != nil {
		// Undo our MPI_Init_thread only when every rank fails alike:
		// MPI_Finalize synchronises the job, and a lone rank calling it
		// could wait for ranks that went on to their first collective.
		if justInit && unanimous {
			mpiFinalize()
		}
		return nil, err
	}
	if err := m.dupWorld(); err != nil {
		return nil, err
	}
	m.handoffAt = handoffAt
	mpiState.open++
	mpiState.newest = m
	return m, nil
}

// mpiInit initialises MPI unless it already is (by the program, or for an
// earlier backend), and returns the thread level MPI provides and whether
// this call initialised it. Under mpiState's lock.
func mpiInit() (provided C.int, justInit bool, err error) {
	var flag C.int
	if rc := C.MPI_Finalized(&flag); rc != C.MPI_SUCCESS {
		return 0, false, mpiError("MPI_Finalized", rc)
	}
	if flag != 0 {
		return 0, false, errors.New("MPI was finalised in this process and cannot be initialised again")
	}
	if rc := C.MPI_Initialized(&flag); rc != C.MPI_SUCCESS {
		return 0, false, mpiError("MPI_Initialized", rc)
	}
	if flag != 0 {
		if rc := C.MPI_Query_thread(&provided); rc != C.MPI_SUCCESS {
			return 0, false, mpiError("MPI_Query_thread", rc)
		}
		return provided, false, nil
	}
	mpiState.initCalls++
	if rc := C.bk_init_thread(&provided); rc != C.MPI_SUCCESS {
		return 0, false, mpiError("MPI_Init_thread", rc)
	}
	mpiState.owned = true
	// Errors on WORLD return instead of aborting the job. Only when we
	// initialised MPI: someone else's WORLD keeps its handler.
	if rc := C.bk_errors_return(C.bk_comm_world()); rc != C.MPI_SUCCESS {
		return 0, true, mpiError("MPI_Comm_set_errhandler", rc)
	}
	return provided, true, nil
}

// mpiJoin checks MPI's thread level and world against the launcher's
// topology. unanimous marks the failures every rank sees alike.
func mpiJoin(t topology.Topology, provided C.int) (m *mpiBackend, unanimous bool, err error) {
	if provided < C.BK_THREAD_SERIALIZED {
		return nil, true, fmt.Errorf("the MPI library provides thread level %s, the Go backend needs MPI_THREAD_SERIALIZED "+
			"(goroutines move between OS threads); rebuild MPI with thread support", threadLevel(int(provided)))
	}
	world := C.bk_comm_world()
	var rank, size C.int
	if rc := C.bk_comm_size(world, &size); rc != C.MPI_SUCCESS {
		return nil, false, mpiError("MPI_Comm_size", rc)
	}
	if rc := C.bk_comm_rank(world, &rank); rc != C.MPI_SUCCESS {
		return nil, false, mpiError("MPI_Comm_rank", rc)
	}
	if err := checkWorld(Library, int(rank), int(size), t); err != nil {
		// Every rank sees the same two sizes; a wrong rank is this one's.
		return nil, int(size) != t.WorldSize, err
	}
	return &mpiBackend{rank: int(rank), size: int(size)}, false, nil
}

// dupWorld gives m a duplicate of MPI_COMM_WORLD that returns its errors,
// and makes the max and min ops for the first backend.
func (m *mpiBackend) dupWorld() error {
	if rc := C.bk_comm_dup(C.bk_comm_world(), &m.comm); rc != C.MPI_SUCCESS {
		return mpiError("MPI_Comm_dup", rc)
	}
	var err error
	if rc := C.bk_errors_return(m.comm); rc != C.MPI_SUCCESS {
		err = mpiError("MPI_Comm_set_errhandler", rc)
	}
	if err == nil && mpiState.open == 0 {
		if rc := C.bk_create_ops(); rc != C.MPI_SUCCESS {
			err = mpiError("MPI_Op_create", rc)
		}
	}
	if err != nil {
		C.bk_comm_free(&m.comm)
	}
	return err
}

// mpiFinalize finalises the MPI this package initialised.
func mpiFinalize() C.int {
	mpiState.owned = false
	mpiState.finalized++
	return C.MPI_Finalize()
}

func (m *mpiBackend) Name() string { return "mpi" }
func (m *mpiBackend) Rank() int    { return m.rank }
func (m *mpiBackend) Size() int    { return m.size }

// Close frees our communicator; the last Close finalises MPI if this package
// initialised it. Later calls return nil.
func (m *mpiBackend) Close() error {
	mpiState.Lock()
	defer mpiState.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	if rc := C.bk_comm_free(&m.comm); rc != C.MPI_SUCCESS {
		errs = append(errs, mpiError("MPI_Comm_free", rc))
	}
	mpiState.open--
	if mpiState.open == 0 {
		if rc := C.bk_free_ops(); rc != C.MPI_SUCCESS {
			errs = append(errs, mpiError("MPI_Op_free", rc))
		}
		mpiState.worker.stop()
		mpiState.worker, mpiState.workerOff = nil, false
	}
	if mpiState.open == 0 && mpiState.owned {
		if rc := mpiFinalize(); rc != C.MPI_SUCCESS {
			errs = append(errs, mpiError("MPI_Finalize", rc))
		}
	}
	return errors.Join(errs...)
}

// The collectives. Buffers are validated by the dispatcher; the checks here
// only keep a direct caller from handing MPI lengths that would make it read
// or write out of bounds. Op and root values go to MPI unchecked: MPI's
// own error (MPI_ERR_OP, MPI_ERR_ROOT) is the clearest answer.
//
// MPI counts are C ints. Allreduce and broadcast split larger buffers into
// calls of at most INT_MAX elements. Allgather and reduce-scatter cannot be
// split that way (each call would need every rank's block), so a whole
// buffer above INT_MAX elements is refused: the API's counts are per rank,
// but libraries compute ranks × count internally, not always without
// overflow.

func (m *mpiBackend) Allreduce(send, recv backend.Buffer, op backend.Op) error {
	if send.Len != recv.Len || send.Type != recv.Type {
		return fmt.Errorf("allreduce: send is %d × %v, receive %d × %v", send.Len, send.Type, recv.Len, recv.Type)
	}
	inplace := 0
	if send.Ptr == recv.Ptr {
		inplace = 1
	}
	return m.call(mpiAllreduce, send.Ptr, recv.Ptr, recv.Len, recv.Type, op, inplace)
}

func (m *mpiBackend) Broadcast(buf backend.Buffer, root int) error {
	if root < math.MinInt32 || root > math.MaxInt32 {
		return fmt.Errorf("broadcast: root %d out of range for %d ranks", root, m.size)
	}
	return m.call(mpiBcast, buf.Ptr, nil, buf.Len, buf.Type, 0, root)
}

func (m *mpiBackend) Allgather(send, recv backend.Buffer) error {
	switch {
	case send.Type != recv.Type || recv.Len != m.size*send.Len:
		return fmt.Errorf("allgather: send is %d × %v, receive %d × %v: want %d × %v", send.Len, send.Type, recv.Len, recv.Type, m.size*send.Len, send.Type)
	case int64(recv.Len) > mpiMaxCount:
		return fmt.Errorf("allgather: %d elements (%d per rank) exceed MPI's limit of %d per call (MPI counts are C ints)", recv.Len, send.Len, mpiMaxCount)
	}
	return m.call(mpiAllgather, send.Ptr, recv.Ptr, send.Len, send.Type, 0, 0)
}

func (m *mpiBackend) ReduceScatter(send, recv backend.Buffer, op backend.Op) error {
	switch {
	case send.Type != recv.Type || send.Len != m.size*recv.Len:
		return fmt.Errorf("reducescatter: send is %d × %v, receive %d × %v: want send of %d × %v", send.Len, send.Type, recv.Len, recv.Type, m.size*recv.Len, recv.Type)
	case int64(send.Len) > mpiMaxCount:
		return fmt.Errorf("reducescatter: %d elements (%d per rank) exceed MPI's limit of %d per call (MPI counts are C ints)", send.Len, recv.Len, mpiMaxCount)
	}
	return m.call(mpiReduceScatter, send.Ptr, recv.Ptr, recv.Len, recv.Type, op, 0)
}

func (m *mpiBackend) Barrier() error { return m.call(mpiBarrier, nil, nil, 0, backend.Float32, 0, 0) }

// call makes one collective call: count elements of type t per the MPI
// call's own meaning, arg the in-place flag or the root. It runs on this
// thread, or on the worker when it moves at least m.handoffAt bytes.
func (m *mpiBackend) call(kind mpiKind, send, recv unsafe.Pointer, count int, t backend.DType, op backend.Op, arg int) error {
	mpiState.Lock()
	if m.closed {
		mpiState.Unlock()
		return backend.ErrClosed
	}
	var rc C.int
	handedOff := false
	if callBytes(kind, count, t, m.size) >= m.handoffAt {
		rc, handedOff = mpiHandoff(kind, m.comm, send, recv, count, t, op, arg, 1)
	}
	yield := false
	if !handedOff {
		rc = C.bk_call(C.int(kind), m.comm, (*C.char)(send), (*C.char)(recv), C.int64_t(count), C.int(t), C.int(op), C.int(arg), C.int64_t(mpiMaxCount))
		if now := time.Now(); yieldDue(now, m.lastYield) {
			m.lastYield, yield = now, true
		}
	}
	mpiState.Unlock()
	if yield {
		runtime.Gosched()
	}
	if rc != C.MPI_SUCCESS {
		return mpiError(mpiCallNames[kind], rc)
	}
	return nil
}

// callBytes is what a call moves on this rank: the whole buffer, for
// allgather and reduce-scatter every rank's block.
func callBytes(kind mpiKind, count int, t backend.DType, ranks int) int {
	bytes := count * t.Size()
	if kind == mpiAllgather || kind == mpiReduceScatter {
		bytes *= ranks
	}
	return bytes
}

// mpiWorker is the Go side of the worker thread: the pipes that carry its
// requests and results. The calling goroutine waits for each result through
// the netpoller, so that its P is free while MPI runs and sysmon sleeps.
//
// Every step of a hand-over is a raw system call or a memory store, none of
// them a cgo call or a syscall.Syscall: those tell the runtime a system
// call begins, which wakes a sleeping sysmon into polling every 20 µs on
// the core the rank busy-polls on (docs/mpi-backend.md).
type mpiWorker struct {
	req     int             // the request pipe's write end (blocking)
	reqRead int             // its read end, the thread's
	done    *os.File        // the result pipe's read end, in the netpoller
	doneW   *os.File        // its write end, the thread's
	raw     syscall.RawConn // done's
	pin     runtime.Pinner
}

// startMPIWorker makes the pipes and starts the thread; nil when either
// cannot be had (the calls then stay on their callers' threads).
func startMPIWorker() *mpiWorker {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		return nil
	}
	w := &mpiWorker{reqRead: fds[0], req: fds[1]}
	var err error
	if w.done, w.doneW, err = os.Pipe(); err == nil {
		w.raw, err = w.done.SyscallConn()
	}
	if err == nil && C.bk_start_worker(C.int(w.reqRead), C.int(w.doneW.Fd())) == 0 {
		return w
	}
	w.close()
	return nil
}

// close closes whatever pipe ends exist (the thread is not running).
func (w *mpiWorker) close() {
	syscall.Close(w.req)
	syscall.Close(w.reqRead)
	if w.done != nil {
		w.done.Close()
		w.doneW.Close()
	}
}

// stop ends the thread (end of file on its request pipe) and closes the
// pipes (nil: nothing started).
func (w *mpiWorker) stop() {
	if w == nil {
		return
	}
	syscall.Close(w.req)
	w.req = -1
	C.bk_join_worker()
	w.close()
}

// mpiHandoff runs one call (iters times in a row) on the worker, starting
// it on first use, and waits for it (under mpiState's lock). ok is false
// when the call was not made: then the caller makes it itself.
func mpiHandoff(kind mpiKind, comm C.uintptr_t, send, recv unsafe.Pointer, count int, t backend.DType, op backend.Op, arg, iters int) (rc C.int, ok bool) {
	if mpiState.workerOff {
		return 0, false
	}
	w := mpiState.worker
	if w == nil {
		if w = startMPIWorker(); w == nil {
			mpiState.workerOff = true
			return 0, false
		}
		mpiState.worker = w
	}
	// The thread reads these pointers from C memory: pinned till it is done.
	for _, p := range [2]unsafe.Pointer{send, recv} {
		if p != nil {
			w.pin.Pin(p)
		}
	}
	defer w.pin.Unpin()
	req := &C.batchkit_mpi_worker
	req.kind, req.h, req.send, req.recv = C.int(kind), comm, C.uintptr_t(uintptr(send)), C.uintptr_t(uintptr(recv))
	req.count, req.t, req.op, req.arg = C.int64_t(count), C.int(t), C.int(op), C.int(arg)
	req.max, req.iters = C.int64_t(mpiMaxCount), C.int64_t(iters)
	if !rawWrite(w.req, 'r') { // cannot happen: a pipe we own, with room
		mpiState.workerOff = true
		return 0, false
	}
	mpiState.handoffs++
	return w.result(), true
}

// result waits in the netpoller for the worker's int32 result.
func (w *mpiWorker) result() C.int {
	var res [4]byte
	got := 0
	err := w.raw.Read(func(fd uintptr) bool {
		for got < len(res) {
			n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&res[got])), uintptr(len(res)-got))
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return false // wait in the netpoller
			case e != 0 || n == 0:
				return true
			}
			got += int(n)
		}
		return true
	})
	if err != nil || got != len(res) {
		// Cannot happen with pipes we own (a 4-byte write to a pipe is
		// atomic); the thread may still be using the buffers, so wait for
		// it in C, and make no more hand-overs.
		mpiState.workerOff = true
		if got != 0 {
			return C.MPI_ERR_INTERN
		}
		return C.bk_wait_result(C.int(w.done.Fd()))
	}
	return C.int(int32(binary.NativeEndian.Uint32(res[:])))
}

// rawWrite writes one byte with a raw system call (see mpiWorker).
func rawWrite(fd int, b byte) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b)), 1)
		if e == syscall.EINTR {
			continue
		}
		return e == 0 && n == 1
	}
}

// cLoop makes the collective iters times in a row from C, on the worker
// thread while the goroutine waits in the netpoller, and returns how long
// that took: BenchmarkMPIOverhead's reference for the same calls made one
// by one through the Go API, in the same process, on the same buffers.
func (m *mpiBackend) cLoop(kind mpiKind, send, recv unsafe.Pointer, count int, t backend.DType, op backend.Op, arg, iters int) (time.Duration, error) {
	mpiState.Lock()
	defer mpiState.Unlock()
	if m.closed {
		return 0, backend.ErrClosed
	}
	start := time.Now()
	rc, ok := mpiHandoff(kind, m.comm, send, recv, count, t, op, arg, iters)
	took := time.Since(start)
	if !ok {
		return 0, errors.New("the MPI worker thread is not available")
	}
	if rc != C.MPI_SUCCESS {
		return 0, mpiError(mpiCallNames[kind], rc)
	}
	return took, nil
}

// cAbort calls C's abort() from MPI's side of the process (tests).
func cAbort() { C.bk_abort() }

// mpiInitialized and mpiFinalized report MPI's own view (tests).
func mpiInitialized() bool {
	var flag C.int
	C.MPI_Initialized(&flag)
	return flag != 0
}

func mpiFinalized() bool {
	var flag C.int
	C.MPI_Finalized(&flag)
	return flag != 0
}

// mpiError turns an MPI return code into an *Error carrying the call's
// name, the error class and MPI_Error_string's text.
func mpiError(call string, rc C.int) error {
	var buf [C.BK_MAX_ERROR_STRING]C.char
	n := C.bk_error_string(rc, &buf[0])
	msg := C.GoStringN(&buf[0], n)
	return newError(call, int(rc), C.GoString(C.bk_class_name(rc)), msg)
}

func threadLevel(l int) string {
	switch l {
	case int(C.MPI_THREAD_SINGLE):
		return "MPI_THREAD_SINGLE"
	case int(C.MPI_THREAD_FUNNELED):
		return "MPI_THREAD_FUNNELED"
	case int(C.MPI_THREAD_SERIALIZED):
		return "MPI_THREAD_SERIALIZED"
	case int(C.MPI_THREAD_MULTIPLE):
		return "MPI_THREAD_MULTIPLE"
	}
	return fmt.Sprintf("%d", l)
}
