//go:build (mpi || mpich) && !(mpi && mpich)

package mpi

// The MPI backend: cgo bindings to the MPI library the binary is built
// against (tag mpi = Open MPI, tag mpich = MPICH or ABI-compatible Intel MPI).
//
// The C is in shim.c and shim.h (MPI handles stay on that side: Go never
// touches a handle or a predefined object), the max and min rules in the
// shared internal/handoff/reduce.h, and the worker thread is the shared
// internal/handoff. One cgo call per collective keeps the overhead per call
// to the cgo transition and a mutex.
//
// Go memory is handed to MPI only for the duration of one C call: the one
// non-blocking call (AllreduceIdle's MPI_Iallreduce) is waited for inside
// the C function that starts it. Short calls run on the calling goroutine's thread and
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
#cgo CPPFLAGS: -I${SRCDIR}/../internal/handoff
#cgo noescape bk_call
#cgo nocallback bk_call
#cgo noescape bk_allreduce_idle
#cgo nocallback bk_allreduce_idle
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/internal/handoff"
	"github.com/batchkit/batchkit/trainer/collective/internal/yield"
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

	worker    *handoff.Worker // started by the first hand-over
	workerOff bool            // it could not be started: calls stay on their callers' threads
	handoffs  int             // calls the worker made (tests)

	newest *mpiBackend // the backend New made last (tests: the one under a Comm)
}

// mpiMaxCount is the largest element count of one MPI call (MPI counts are
// C ints). Tests lower it to exercise the chunking.
var mpiMaxCount int64 = math.MaxInt32

type mpiBackend struct {
	comm       C.uintptr_t // our duplicate of MPI_COMM_WORLD
	closed     bool        // under mpiState's lock
	rank, size int
	handoffAt  int           // calls moving at least this many bytes run on the worker (mpiHandoffAt)
	yield      yield.Yielder // under mpiState's lock
	idle       handoff.IdlePoll
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
	idle, err := idlePoll(getenv)
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
	m.handoffAt, m.idle = handoffAt, idle
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
		mpiState.worker.Stop()
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
	inplace, err := allreduceArgs(send, recv)
	if err != nil {
		return err
	}
	return m.call(mpiAllreduce, send.Ptr, recv.Ptr, recv.Len, recv.Type, op, inplace)
}

// allreduceArgs checks an allreduce's buffers and says whether it is in
// place (1: the shim passes MPI_IN_PLACE).
func allreduceArgs(send, recv backend.Buffer) (inplace int, err error) {
	if send.Len != recv.Len || send.Type != recv.Type {
		return 0, fmt.Errorf("allreduce: send is %d × %v, receive %d × %v", send.Len, send.Type, recv.Len, recv.Type)
	}
	if send.Ptr == recv.Ptr {
		return 1, nil
	}
	return 0, nil
}

// AllreduceIdle is Allreduce for a call made beside compute (the
// trainer's gradient buckets): MPI_Iallreduce, then MPI_Test with sleeps
// between tests that found nothing to do (m.idle), on the worker thread
// while the goroutine waits parked, so that the wait leaves the core, and
// the goroutine's P, to the compute (at GOMAXPROCS=1 a cgo call holds the
// only P until sysmon takes it back, up to 10 ms). On this thread if the
// worker cannot run. Same result, bit for bit: the same reduction, only
// the waiting differs (MPI's non-blocking algorithms are their own, but at
// 2 ranks a sum is one addition, a + b = b + a).
func (m *mpiBackend) AllreduceIdle(send, recv backend.Buffer, op backend.Op) error {
	inplace, err := allreduceArgs(send, recv)
	if err != nil {
		return err
	}
	mpiState.Lock()
	defer mpiState.Unlock()
	if m.closed {
		return backend.ErrClosed
	}
	rc, ok := mpiHandoffIdle(mpiAllreduce, m.comm, send.Ptr, recv.Ptr, recv.Len, recv.Type, op, inplace, 1, m.idle)
	if !ok {
		rc = C.bk_allreduce_idle(m.comm, (*C.char)(send.Ptr), (*C.char)(recv.Ptr), C.int64_t(recv.Len), C.int(recv.Type), C.int(op),
			C.int(inplace), C.int64_t(mpiMaxCount), C.int64_t(m.idle.Min.Nanoseconds()), C.int64_t(m.idle.Max.Nanoseconds()))
	}
	if rc != C.MPI_SUCCESS {
		return mpiError("MPI_Iallreduce", rc)
	}
	return nil
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
	bytes := callBytes(kind, count, t, m.size)
	if bytes >= m.handoffAt {
		rc, handedOff = mpiHandoff(kind, m.comm, send, recv, count, t, op, arg, 1)
	}
	due := false
	if !handedOff {
		rc = C.bk_call(C.int(kind), m.comm, (*C.char)(send), (*C.char)(recv), C.int64_t(count), C.int(t), C.int(op), C.int(arg), C.int64_t(mpiMaxCount))
		due = m.yield.After(bytes)
	}
	mpiState.Unlock()
	if due {
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

// mpiHandoff runs one call (iters times in a row) on the shared worker
// thread (internal/handoff), starting it on first use, and waits for it in
// the netpoller (under mpiState's lock). ok is false when the call was not
// made: then the caller makes it itself. MPI's calls are never abandoned
// (no deadline, no Interrupt: a dead peer is the MPI library's to report),
// so the worker's Start and Call errors are the cases that cannot happen
// with pipes we own; each turns the worker off for good, as before.
func mpiHandoff(kind mpiKind, comm C.uintptr_t, send, recv unsafe.Pointer, count int, t backend.DType, op backend.Op, arg, iters int) (rc C.int, ok bool) {
	return mpiHandoffIdle(kind, comm, send, recv, count, t, op, arg, iters, handoff.IdlePoll{})
}

// mpiHandoffIdle is mpiHandoff; idle set makes an allreduce AllreduceIdle's.
func mpiHandoffIdle(kind mpiKind, comm C.uintptr_t, send, recv unsafe.Pointer, count int, t backend.DType, op backend.Op, arg, iters int, idle handoff.IdlePoll) (rc C.int, ok bool) {
	if mpiState.workerOff {
		return 0, false
	}
	w := mpiState.worker
	if w == nil {
		var err error
		if w, err = handoff.Start(unsafe.Pointer(C.bk_mpi_call)); err != nil {
			mpiState.workerOff = true
			return 0, false
		}
		mpiState.worker = w
	}
	r := handoff.Request{Kind: int(kind), DType: int(t), Op: int(op), Arg: arg, Handle: uintptr(comm),
		Send: send, Recv: recv, Count: int64(count), Max: mpiMaxCount, Iters: int64(iters), Idle: idle}
	code, _, err := w.Call(r, time.Time{})
	if errors.Is(err, handoff.ErrNotSent) {
		mpiState.workerOff = true
		return 0, false
	}
	mpiState.handoffs++
	if err != nil || w.Broken() {
		mpiState.workerOff = true
	}
	if err != nil || code == handoff.Lost {
		return C.MPI_ERR_INTERN, true
	}
	return C.int(code), true
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
