//go:build (mpi || mpich) && !(mpi && mpich)

package collective

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
// keep nothing (hence #cgo noescape / nocallback on bk_call); long ones run
// on a C thread while the goroutine waits (see mpiLongCall), their buffers
// pinned with runtime.Pinner for that time. Buffers
// travel as char *: cgo checks a pointer argument for Go pointers inside
// the memory it points to only when the pointee type could hold one, and for
// *C.char it cannot, which saves that runtime check (~40 ns) on every call.
// Buffers only ever view float32/float64 slices, which hold no pointers.

/*
#cgo mpi pkg-config: ompi
#cgo mpi CFLAGS: -DBK_WANT_OPEN_MPI
#cgo mpich pkg-config: mpich
#cgo mpich CFLAGS: -DBK_WANT_MPICH
#cgo noescape bk_call
#cgo nocallback bk_call
#cgo nocallback bk_submit
#cgo nocallback bk_finish
#cgo nocallback bk_barrier

#include <mpi.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stddef.h>
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

// The values of collective.DType and collective.Op (asserted in Go).
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
static inline MPI_Op bk_op(int op) {
	switch (op) {
	case BK_SUM: return MPI_SUM;
	case BK_MAX: return MPI_MAX;
	case BK_MIN: return MPI_MIN;
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
static int bk_barrier(uintptr_t h) { return MPI_Barrier(bk_comm(h)); }

// bk_call runs one collective, named by kind (the values of mpiKind). arg is
// the in-place flag for allreduce and the root for broadcast.
enum { BK_ALLREDUCE = 1, BK_BCAST = 2, BK_ALLGATHER = 3, BK_REDUCE_SCATTER = 4 };
static int bk_call(int kind, uintptr_t h, char *send, char *recv, int64_t count, int t, int op, int arg, int64_t max) {
	switch (kind) {
	case BK_ALLREDUCE: return bk_allreduce(h, send, recv, count, t, op, arg, max);
	case BK_BCAST: return bk_bcast(h, send, count, t, arg, max);
	case BK_ALLGATHER: return bk_allgather(h, send, recv, (int)count, t);
	case BK_REDUCE_SCATTER: return bk_reduce_scatter_block(h, send, recv, (int)count, t, op);
	}
	return MPI_ERR_ARG;
}

// ---- the worker: one C thread that makes the long calls (see mpiLongCall).
// The Go side holds mpiState's lock from bk_submit to bk_finish, so there is
// at most one call in flight and MPI still sees serialised calls.

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	int started, pending, quit;
	int done_fd; // the worker writes one byte here when a call is done
	int kind, t, op, arg, rc;
	uintptr_t h;
	char *send, *recv;
	int64_t count, max, iters;
} bk_w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void *bk_worker(void *unused) {
	(void)unused;
	pthread_mutex_lock(&bk_w.mu);
	for (;;) {
		while (!bk_w.pending && !bk_w.quit)
			pthread_cond_wait(&bk_w.cv, &bk_w.mu);
		if (!bk_w.pending)
			break;
		pthread_mutex_unlock(&bk_w.mu);
		int rc = MPI_SUCCESS;
		for (int64_t i = 0; i < bk_w.iters && rc == MPI_SUCCESS; i++)
			rc = bk_call(bk_w.kind, bk_w.h, bk_w.send, bk_w.recv, bk_w.count, bk_w.t, bk_w.op, bk_w.arg, bk_w.max);
		pthread_mutex_lock(&bk_w.mu);
		bk_w.rc = rc;
		bk_w.pending = 0;
		pthread_cond_broadcast(&bk_w.cv);
		char b = 1;
		while (write(bk_w.done_fd, &b, 1) < 0 && errno == EINTR)
			;
	}
	pthread_mutex_unlock(&bk_w.mu);
	return NULL;
}

// bk_submit hands one call, made iters times in a row (1 but in
// TestMPIOverhead), to the worker, starting the thread on first use with
// every signal blocked (signals belong to Go's threads). It returns 0, or
// the error number when the thread cannot be started.
static int bk_submit(int done_fd, int kind, uintptr_t h, char *send, char *recv, int64_t count, int t, int op, int arg, int64_t max, int64_t iters) {
	pthread_mutex_lock(&bk_w.mu);
	if (!bk_w.started) {
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		int err = pthread_create(&bk_w.th, NULL, bk_worker, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (err != 0) {
			pthread_mutex_unlock(&bk_w.mu);
			return err;
		}
		bk_w.started = 1;
	}
	bk_w.done_fd = done_fd;
	bk_w.kind = kind, bk_w.h = h, bk_w.send = send, bk_w.recv = recv, bk_w.count = count;
	bk_w.t = t, bk_w.op = op, bk_w.arg = arg, bk_w.max = max, bk_w.iters = iters;
	bk_w.pending = 1;
	pthread_cond_broadcast(&bk_w.cv);
	pthread_mutex_unlock(&bk_w.mu);
	return 0;
}

// bk_finish waits for the submitted call (it is normally done: the caller
// has read its byte) and returns its result.
static int bk_finish(void) {
	pthread_mutex_lock(&bk_w.mu);
	while (bk_w.pending)
		pthread_cond_wait(&bk_w.cv, &bk_w.mu);
	int rc = bk_w.rc;
	pthread_mutex_unlock(&bk_w.mu);
	return rc;
}

// bk_stop_worker ends the thread (before MPI_Finalize).
static void bk_stop_worker(void) {
	pthread_mutex_lock(&bk_w.mu);
	if (!bk_w.started) {
		pthread_mutex_unlock(&bk_w.mu);
		return;
	}
	bk_w.quit = 1;
	pthread_cond_broadcast(&bk_w.cv);
	pthread_mutex_unlock(&bk_w.mu);
	pthread_join(bk_w.th, NULL);
	bk_w.started = 0, bk_w.quit = 0;
}

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
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/batchkit/batchkit/topology"
)

// The C side switches on the values of DType and Op: a compile error here
// means the two lists have drifted apart.
var (
	_ = [1]struct{}{}[int(C.BK_F32)-int(Float32)]
	_ = [1]struct{}{}[int(C.BK_F64)-int(Float64)]
	_ = [1]struct{}{}[int(C.BK_SUM)-int(Sum)]
	_ = [1]struct{}{}[int(C.BK_MAX)-int(Max)]
	_ = [1]struct{}{}[int(C.BK_MIN)-int(Min)]
)

// mpiKind names a collective for bk_call and bk_submit.
type mpiKind C.int

const (
	mpiAllreduce     mpiKind = C.BK_ALLREDUCE
	mpiBcast         mpiKind = C.BK_BCAST
	mpiAllgather     mpiKind = C.BK_ALLGATHER
	mpiReduceScatter mpiKind = C.BK_REDUCE_SCATTER
)

var mpiCallNames = [...]string{
	mpiAllreduce: "MPI_Allreduce", mpiBcast: "MPI_Bcast",
	mpiAllgather: "MPI_Allgather", mpiReduceScatter: "MPI_Reduce_scatter_block",
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

	worker   *mpiWorker // started by the first long call
	handoffs int        // calls the worker made (tests)
}

// mpiMaxCount is the largest element count of one MPI call (MPI counts are
// C ints). Tests lower it to exercise the chunking.
var mpiMaxCount int64 = math.MaxInt32

type mpiBackend struct {
	comm       C.uintptr_t // our duplicate of MPI_COMM_WORLD
	closed     bool        // under mpiState's lock
	rank, size int
	lastYield  time.Duration // since mpiEpoch; under mpiState's lock
	times      callTimes     // under mpiState's lock
	handoff    bool          // long calls go to the worker (BATCHKIT_MPI_HANDOFF=0: never)
}

// The Go scheduler and MPI. To the Go runtime a cgo call is a system call,
// and a goroutine that does nothing but call MPI confuses sysmon, which
// watches system calls (Go 1.26):
//
//   - The goroutine comes back from each call still holding its P and never
//     passes through the scheduler. After 10 ms without a reschedule sysmon
//     preempts it, which for a goroutine inside MPI means taking its P away
//     and going back to checking every 20 µs; observed: it keeps taking it.
//   - With GOMAXPROCS=1, which is what Go picks when the launcher binds each
//     rank to one core (Open MPI's default), there is no idle P, so sysmon
//     hands off the P of any call that spans two of its ticks (> 20 µs),
//     starting a spinning thread that finds nothing to do, after which every
//     P is idle and sysmon sleeps until the next return from MPI wakes it.
//
// Either way: thousands of futex wake-ups and context switches a second on
// the cores the busy-polling ranks need. Measured on 2 ranks (Open MPI, 64
// KiB allreduce): ~20,000 context switches/s against ~25 for the same loop
// in C, and 2-3× its time. So newMPI raises GOMAXPROCS from 1 to 2 unless
// GOMAXPROCS is set in the environment, and the backend yields
// (runtime.Gosched) before sysmon's limit comes: see yieldDue. Each yield
// has its price, though: with a P idle, Gosched wakes another thread, which
// takes the goroutine over while the first one spins, both on the rank's
// core (~600 context switches/s at 200 yields/s, against ~15 for C). In one
// process, against the same calls made from C (TestMPIOverhead), yielding
// every 1 ms left Go at 0.81-0.84× C's bandwidth at 1 MiB, every 5 ms at
// 0.94-0.98×, and every 8 ms at 0.98-1.0× from 256 KiB to 4 MiB.
//
// Long calls are the other case: one that spans sysmon's 10 ms limit has its
// P retaken, and every return from MPI then sets sysmon polling every 20 µs
// again, on the core the rank busy-polls on (~35 wake-ups per 40 ms call,
// 4-5× the context switches of C; 64 MiB allreduce 5-10 % behind C). So a
// call whose size class last took at least mpiLongCall runs on a C thread
// (the worker) while the goroutine waits on a pipe through the netpoller:
// its P is free, sysmon sleeps, and the hand-over costs ~25 µs, under 1 %
// of such a call.

// mpiLongCall: half of sysmon's limit. Tests set 0 to send every call to
// the worker. Calls under mpiHandoffMin bytes are quick unless they wait for
// a straggler, and always stay on the caller's thread: they skip the clock
// read that timing them would take (~20 ns, a fifth of the Go overhead of
// an 8-byte allreduce).
var (
	mpiLongCall   = 5 * time.Millisecond
	mpiHandoffMin = 64 << 10
)

var mpiEpoch = time.Now()

// yieldDue reports whether the caller should runtime.Gosched after the
// call that ended at now (since mpiEpoch; under mpiState's lock) and took
// took (0 when not timed), and if so counts the yield as made.
func (m *mpiBackend) yieldDue(now, took time.Duration) bool {
	if !yieldDue(now-m.lastYield, took) {
		return false
	}
	m.lastYield = now
	return true
}

func newMPI(t topology.Topology) (Backend, error) {
	mpiState.Lock()
	defer mpiState.Unlock()

	var flag C.int
	if rc := C.MPI_Finalized(&flag); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Finalized", rc)
	}
	if flag != 0 {
		return nil, errors.New("MPI was finalised in this process and cannot be initialised again")
	}
	if rc := C.MPI_Initialized(&flag); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Initialized", rc)
	}
	var provided C.int
	justInit := false
	if flag == 0 {
		mpiState.initCalls++
		if rc := C.bk_init_thread(&provided); rc != C.MPI_SUCCESS {
			return nil, mpiError("MPI_Init_thread", rc)
		}
		mpiState.owned, justInit = true, true
		// Errors on WORLD return instead of aborting the job. Only when we
		// initialised MPI: someone else's WORLD keeps its handler.
		if rc := C.bk_errors_return(C.bk_comm_world()); rc != C.MPI_SUCCESS {
			return nil, mpiError("MPI_Comm_set_errhandler", rc)
		}
	} else if rc := C.MPI_Query_thread(&provided); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Query_thread", rc)
	}
	// giveUp undoes our MPI_Init_thread when every rank is bound to fail the
	// same way (MPI_Finalize synchronises the job: a lone rank calling it
	// could wait for ranks that went on to their first collective).
	giveUp := func(err error) error {
		if justInit {
			mpiState.owned = false
			mpiState.finalized++
			C.MPI_Finalize()
		}
		return err
	}
	if provided < C.BK_THREAD_SERIALIZED {
		return nil, giveUp(fmt.Errorf("the MPI library provides thread level %s, the Go backend needs MPI_THREAD_SERIALIZED "+
			"(goroutines move between OS threads); rebuild MPI with thread support", threadLevel(int(provided))))
	}

	world := C.bk_comm_world()
	var rank, size C.int
	if rc := C.bk_comm_size(world, &size); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Comm_size", rc)
	}
	if rc := C.bk_comm_rank(world, &rank); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Comm_rank", rc)
	}
	if err := checkMPIWorld(MPIBuilt, int(rank), int(size), t); err != nil {
		if int(size) != t.WorldSize {
			// Every rank sees the same two sizes, so every rank gives up.
			return nil, giveUp(err)
		}
		return nil, err
	}

	m := &mpiBackend{rank: int(rank), size: int(size)}
	if rc := C.bk_comm_dup(world, &m.comm); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Comm_dup", rc)
	}
	var err error
	if rc := C.bk_errors_return(m.comm); rc != C.MPI_SUCCESS {
		err = mpiError("MPI_Comm_set_errhandler", rc)
	}
	if err != nil {
		C.bk_comm_free(&m.comm)
		return nil, err
	}
	mpiState.open++
	m.handoff = os.Getenv("BATCHKIT_MPI_HANDOFF") != "0"
	// See "The Go scheduler and MPI" above: a spare P keeps sysmon from
	// handing off the P of every MPI call longer than 20 µs. An explicit
	// GOMAXPROCS is respected.
	if runtime.GOMAXPROCS(0) == 1 && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(2)
	}
	return m, nil
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
		mpiState.worker.stop()
		mpiState.worker = nil
	}
	if mpiState.open == 0 && mpiState.owned {
		mpiState.owned = false
		mpiState.finalized++
		if rc := C.MPI_Finalize(); rc != C.MPI_SUCCESS {
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

func (m *mpiBackend) Allreduce(send, recv Buffer, op Op) error {
	if send.Len != recv.Len || send.Type != recv.Type {
		return fmt.Errorf("allreduce: send is %d × %v, receive %d × %v", send.Len, send.Type, recv.Len, recv.Type)
	}
	inplace := 0
	if send.Ptr == recv.Ptr {
		inplace = 1
	}
	return m.call(mpiAllreduce, send.Ptr, recv.Ptr, recv.Len, recv.Type, op, inplace)
}

func (m *mpiBackend) Broadcast(buf Buffer, root int) error {
	if root < math.MinInt32 || root > math.MaxInt32 {
		return fmt.Errorf("broadcast: root %d out of range for %d ranks", root, m.size)
	}
	return m.call(mpiBcast, buf.Ptr, nil, buf.Len, buf.Type, 0, root)
}

func (m *mpiBackend) Allgather(send, recv Buffer) error {
	switch {
	case send.Type != recv.Type || recv.Len != m.size*send.Len:
		return fmt.Errorf("allgather: send is %d × %v, receive %d × %v: want %d × %v", send.Len, send.Type, recv.Len, recv.Type, m.size*send.Len, send.Type)
	case int64(recv.Len) > mpiMaxCount:
		return fmt.Errorf("allgather: %d elements (%d per rank) exceed MPI's limit of %d per call (MPI counts are C ints)", recv.Len, send.Len, mpiMaxCount)
	}
	return m.call(mpiAllgather, send.Ptr, recv.Ptr, send.Len, send.Type, 0, 0)
}

func (m *mpiBackend) ReduceScatter(send, recv Buffer, op Op) error {
	switch {
	case send.Type != recv.Type || send.Len != m.size*recv.Len:
		return fmt.Errorf("reducescatter: send is %d × %v, receive %d × %v: want send of %d × %v", send.Len, send.Type, recv.Len, recv.Type, m.size*recv.Len, recv.Type)
	case int64(send.Len) > mpiMaxCount:
		return fmt.Errorf("reducescatter: %d elements (%d per rank) exceed MPI's limit of %d per call (MPI counts are C ints)", send.Len, recv.Len, mpiMaxCount)
	}
	return m.call(mpiReduceScatter, send.Ptr, recv.Ptr, recv.Len, recv.Type, op, 0)
}

// call makes one collective call: count elements of type t per the MPI
// call's own meaning, arg the in-place flag or the root. It runs on this
// thread, or on the worker when calls of its size have been long.
func (m *mpiBackend) call(kind mpiKind, send, recv unsafe.Pointer, count int, t DType, op Op, arg int) error {
	// The size class: the bytes the call moves on this rank.
	bytes := count * t.Size()
	if kind == mpiAllgather || kind == mpiReduceScatter {
		bytes *= m.size
	}
	mpiState.Lock()
	if m.closed {
		mpiState.Unlock()
		return ErrClosed
	}
	var rc C.int
	var start time.Duration
	handedOff, timed := false, m.handoff && bytes >= mpiHandoffMin
	if timed {
		start = time.Since(mpiEpoch)
		if m.times.long(bytes, mpiLongCall) {
			rc, handedOff = mpiHandoff(kind, m.comm, send, recv, count, t, op, arg, 1)
		}
	}
	if !handedOff {
		rc = C.bk_call(C.int(kind), m.comm, (*C.char)(send), (*C.char)(recv), C.int64_t(count), C.int(t), C.int(op), C.int(arg), C.int64_t(mpiMaxCount))
	}
	end := time.Since(mpiEpoch)
	var took time.Duration // 0 when not timed
	if timed {
		took = end - start
		m.times.observe(bytes, took)
	}
	yield := false
	if handedOff {
		m.lastYield = end // the goroutine was parked: the scheduler has seen it
	} else {
		yield = m.yieldDue(end, took)
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

func (m *mpiBackend) Barrier() error {
	mpiState.Lock()
	if m.closed {
		mpiState.Unlock()
		return ErrClosed
	}
	rc := C.bk_barrier(m.comm)
	yield := m.yieldDue(time.Since(mpiEpoch), 0)
	mpiState.Unlock()
	if yield {
		runtime.Gosched()
	}
	if rc != C.MPI_SUCCESS {
		return mpiError("MPI_Barrier", rc)
	}
	return nil
}

// mpiWorker is the Go side of the worker thread (bk_submit): the pipe on
// which the calling goroutine waits for each handed-off call, through the
// netpoller, so that its P is free while MPI runs.
type mpiWorker struct {
	r, w *os.File
	wfd  C.int // w's descriptor, written by the C thread
	buf  [1]byte
	pin  runtime.Pinner
	off  bool // no pipe or no thread: every call stays on its caller's thread
}

// mpiHandoff runs one call (iters times in a row) on the worker, starting
// it on first use, and waits for it (under mpiState's lock). ok is false
// when the call was not made: then the caller makes it itself.
func mpiHandoff(kind mpiKind, comm C.uintptr_t, send, recv unsafe.Pointer, count int, t DType, op Op, arg, iters int) (rc C.int, ok bool) {
	w := mpiState.worker
	if w == nil {
		w = &mpiWorker{}
		var err error
		if w.r, w.w, err = os.Pipe(); err != nil {
			w.off = true
		} else {
			w.wfd = C.int(w.w.Fd())
		}
		mpiState.worker = w
	}
	if w.off {
		return 0, false
	}
	// The C thread keeps these pointers after bk_submit returns.
	for _, p := range [2]unsafe.Pointer{send, recv} {
		if p != nil {
			w.pin.Pin(p)
		}
	}
	defer w.pin.Unpin()
	if C.bk_submit(w.wfd, C.int(kind), comm, (*C.char)(send), (*C.char)(recv), C.int64_t(count), C.int(t), C.int(op), C.int(arg), C.int64_t(mpiMaxCount), C.int64_t(iters)) != 0 {
		w.off = true // pthread_create failed
		return 0, false
	}
	_, err := io.ReadFull(w.r, w.buf[:])
	rc = C.bk_finish() // waits in C if the read failed
	if err != nil {
		w.off = true
	}
	mpiState.handoffs++
	return rc, true
}

// cLoop makes the collective iters times in a row from C, on the worker
// thread while the goroutine waits in the netpoller, and returns how long
// that took: TestMPIOverhead's reference for the same calls made one by one
// through the Go API, in the same process, on the same buffers.
func (m *mpiBackend) cLoop(kind mpiKind, send, recv unsafe.Pointer, count int, t DType, op Op, arg, iters int) (time.Duration, error) {
	mpiState.Lock()
	defer mpiState.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	start := time.Since(mpiEpoch)
	rc, ok := mpiHandoff(kind, m.comm, send, recv, count, t, op, arg, iters)
	end := time.Since(mpiEpoch)
	m.lastYield = end // the goroutine was parked
	if !ok {
		return 0, errors.New("the MPI worker thread is not available")
	}
	if rc != C.MPI_SUCCESS {
		return 0, mpiError(mpiCallNames[kind], rc)
	}
	return end - start, nil
}

// stop ends the worker thread and closes the pipe (nil: nothing started).
func (w *mpiWorker) stop() {
	if w == nil {
		return
	}
	C.bk_stop_worker()
	if w.r != nil {
		w.r.Close()
		w.w.Close()
	}
}

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

// mpiError turns an MPI return code into an *MPIError carrying the call's
// name, the error class and MPI_Error_string's text.
func mpiError(call string, rc C.int) error {
	var buf [C.BK_MAX_ERROR_STRING]C.char
	n := C.bk_error_string(rc, &buf[0])
	msg := C.GoStringN(&buf[0], n)
	return newMPIError(call, int(rc), C.GoString(C.bk_class_name(rc)), msg)
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
