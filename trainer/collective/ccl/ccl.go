//go:build ccl

package ccl

// The binding. The shim (shim.cpp) takes the values of DType and Op as int
// codes and carries oneCCL's objects as uintptr_t handles; every call
// returns a code and leaves oneCCL's text in a buffer. The collectives run
// on the handoff worker thread, which the watchdog can abandon.
//
// The include and library paths below are the default prefix of
// scripts/intel-stack.sh; make build-ccl puts BATCHKIT_INTEL_PREFIX's in
// CGO_CPPFLAGS and CGO_LDFLAGS, which come first. libccl is found through
// the binary's DT_RPATH (--disable-new-dtags), not LD_LIBRARY_PATH: a
// DT_RPATH also serves the libraries libccl itself dlopens (libfabric and
// its providers, from the same lib directory; a DT_RUNPATH would not), so
// the binary runs under any launcher whatever environment it forwards.

/*
#cgo CPPFLAGS: -I${SRCDIR}/../internal/handoff -I/opt/batchkit/intel/include
#cgo CXXFLAGS: -std=c++17
#cgo LDFLAGS: -L/opt/batchkit/intel/lib -lccl -Wl,--disable-new-dtags -Wl,-rpath,/opt/batchkit/intel/lib
#cgo nocallback bkccl_version
#cgo nocallback bkccl_init
#cgo nocallback bkccl_direct
#cgo nocallback bkccl_loop
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/internal/handoff"
	"github.com/batchkit/batchkit/trainer/collective/internal/yield"
	"github.com/batchkit/batchkit/trainer/collective/tcp"
)

// The shim switches on the values of DType and Op: a compile error here
// means the two lists have drifted apart.
var (
	_ = [1]struct{}{}[int(C.BKCCL_F32)-int(backend.Float32)]
	_ = [1]struct{}{}[int(C.BKCCL_F64)-int(backend.Float64)]
	_ = [1]struct{}{}[int(C.BKCCL_SUM)-int(backend.Sum)]
	_ = [1]struct{}{}[int(C.BKCCL_MAX)-int(backend.Max)]
	_ = [1]struct{}{}[int(C.BKCCL_MIN)-int(backend.Min)]
)

// Built reports whether this binary has the ccl backend.
const Built = true

type kind int

const (
	kAllreduce     kind = C.BKCCL_ALLREDUCE
	kBcast         kind = C.BKCCL_BCAST
	kAllgather     kind = C.BKCCL_ALLGATHER
	kReduceScatter kind = C.BKCCL_REDUCE_SCATTER
	kBarrier       kind = C.BKCCL_BARRIER
)

// codeArg is the shim's code for a collective, type or op it does not know.
const codeArg = int(C.BKCCL_ERR_ARG)

var callNames = map[kind]string{kAllreduce: "allreduce", kBcast: "broadcast", kAllgather: "allgather",
	kReduceScatter: "reduce_scatter", kBarrier: "barrier"}

// process is oneCCL's process-wide state: ccl::init once.
var process struct {
	sync.Mutex
	inited  bool
	version string
}

// Version is the oneCCL this binary runs on ("2021.16.1").
func Version() string {
	var buf [64]C.char
	if C.bkccl_version(&buf[0], C.size_t(len(buf))) != C.BKCCL_OK {
		return "unknown"
	}
	return C.GoString(&buf[0])
}

type cclBackend struct {
	mu         sync.Mutex // one call at a time
	rank, size int
	kvs, comm  C.uintptr_t
	star       *tcp.Star
	worker     *handoff.Worker
	timeout    time.Duration
	lost       atomic.Pointer[tcp.LostError]
	closed     bool
	scratch    []float64 // max/min reduce-scatter (see ReduceScatter)

	// The direct path (see call): calls moving fewer than handoffAt bytes
	// run on the calling thread. abort is C memory the watchdog stores 1
	// in; msg is C memory for the shim's text, so that a call allocates
	// nothing (a Go array passed to C escapes: 1 KiB on the heap a call);
	// abandoned is set when a direct call gave up (its buffers stay pinned
	// in pin, oneCCL may still write them).
	handoffAt int
	abort     *C.int32_t
	msg       *msgBuf
	abandoned bool
	pin       runtime.Pinner
	yield     yield.Yielder
	idle      handoff.IdlePoll // AllreduceIdle's sleeps between tests
}

// msgBuf is where the shim leaves oneCCL's text.
type msgBuf [C.BKCCL_MSG_LEN]C.char

func (m *msgBuf) err(call string, rc C.int) error {
	return &Error{Call: call, Code: int(rc), Msg: oneLine(C.GoString(&m[0]))}
}

// New sets oneCCL's environment (Env), initialises it, meets the other
// ranks over batchkit's rendezvous and joins the communicator.
func New(o Options) (backend.Backend, error) {
	set, err := Env(o.Topology, o.CPUs, o.Getenv)
	if err != nil {
		return nil, err
	}
	// oneCCL reads its variables from the C environment at ccl::init; with
	// cgo, os.Setenv writes there too.
	for k, v := range set {
		if err := os.Setenv(k, v); err != nil {
			return nil, fmt.Errorf("setenv %s: %w", k, err)
		}
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	at, err := handoffAt(getenv)
	if err != nil {
		return nil, err
	}
	idle, err := handoff.ParseIdlePoll(getenv(envvars.IdlePoll))
	if err != nil {
		return nil, setupf("%v", err)
	}
	if err := initOnce(); err != nil {
		return nil, err
	}
	w, err := handoff.Start(unsafe.Pointer(C.bkccl_call))
	if err != nil {
		return nil, err
	}
	r := o.Rendezvous
	b := &cclBackend{rank: r.Rank, size: r.Size, worker: w, timeout: r.Timeout, handoffAt: at, idle: idle,
		abort: (*C.int32_t)(C.calloc(1, 4)), // never freed: the watchdog may store to it after Close
		msg:   (*msgBuf)(C.calloc(1, C.BKCCL_MSG_LEN))}
	if b.timeout <= 0 {
		b.timeout = tcp.DefaultTimeout
	}
	payload := func() ([]byte, error) {
		var addr [C.BKCCL_ADDR_LEN]C.char
		var m msgBuf
		if rc := C.bkccl_main_kvs(&b.kvs, &addr[0], &m[0], C.size_t(len(m))); rc != C.BKCCL_OK {
			return nil, m.err("create_main_kvs", rc)
		}
		return C.GoBytes(unsafe.Pointer(&addr[0]), C.BKCCL_ADDR_LEN), nil
	}
	step := func(addr []byte) error {
		var m msgBuf
		if len(addr) != C.BKCCL_ADDR_LEN {
			return fmt.Errorf("KVS address of %d bytes, want %d", len(addr), C.BKCCL_ADDR_LEN)
		}
		if b.rank != 0 {
			ca := C.CBytes(addr)
			defer C.free(ca)
			if rc := C.bkccl_kvs((*C.char)(ca), &b.kvs, &m[0], C.size_t(len(m))); rc != C.BKCCL_OK {
				return m.err("create_kvs", rc)
			}
		}
		if rc := C.bkccl_comm_create(C.int(b.size), C.int(b.rank), b.kvs, &b.comm, &m[0], C.size_t(len(m))); rc != C.BKCCL_OK {
			return m.err("create_communicator", rc)
		}
		return nil
	}
	if b.star, err = tcp.JoinStar(r, "ccl", payload, step); err != nil {
		w.Stop()
		C.free(unsafe.Pointer(b.abort))
		C.free(unsafe.Pointer(b.msg))
		return nil, err
	}
	b.star.Watch(func(e *tcp.LostError) {
		b.lost.Store(e)
		atomic.StoreInt32((*int32)(unsafe.Pointer(b.abort)), 1)
		b.worker.Interrupt()
	})
	return b, nil
}

func initOnce() error {
	process.Lock()
	defer process.Unlock()
	if process.inited {
		return nil
	}
	var m msgBuf
	if rc := C.bkccl_init(&m[0], C.size_t(len(m))); rc != C.BKCCL_OK {
		return m.err("init", rc)
	}
	process.inited = true
	return nil
}

func (b *cclBackend) Name() string { return "ccl" }
func (b *cclBackend) Rank() int    { return b.rank }
func (b *cclBackend) Size() int    { return b.size }

// Close frees the communicator and says goodbye on the rendezvous
// connections. After a lost rank or an abandoned call oneCCL's objects are
// left alone: their destructors could wait for the dead rank.
func (b *cclBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	var errs []error
	if !b.worker.Broken() && !b.abandoned && b.lost.Load() == nil {
		var m msgBuf
		if b.comm != 0 {
			if rc := C.bkccl_comm_free(b.comm, &m[0], C.size_t(len(m))); rc != C.BKCCL_OK {
				errs = append(errs, m.err("communicator destructor", rc))
			}
		}
		if b.kvs != 0 {
			if rc := C.bkccl_kvs_free(b.kvs, &m[0], C.size_t(len(m))); rc != C.BKCCL_OK {
				errs = append(errs, m.err("kvs destructor", rc))
			}
		}
	}
	b.worker.Stop()
	C.free(unsafe.Pointer(b.msg)) // a direct call uses it under b.mu, and none follows b.closed
	b.msg = nil
	errs = append(errs, b.star.Close())
	return errors.Join(errs...)
}

func (b *cclBackend) Allreduce(send, recv backend.Buffer, op backend.Op) error {
	return b.allreduce(send, recv, op, false)
}

// allreduce is Allreduce, or with idle AllreduceIdle.
func (b *cclBackend) allreduce(send, recv backend.Buffer, op backend.Op, idle bool) error {
	if send.Len != recv.Len || send.Type != recv.Type {
		return fmt.Errorf("allreduce: send is %d × %v, receive %d × %v", send.Len, send.Type, recv.Len, recv.Type)
	}
	return b.callHow(kAllreduce, send.Ptr, recv.Ptr, recv.Len, recv.Type, op, 0, idle)
}

// AllreduceIdle is Allreduce for a call made beside compute (the
// trainer's gradient buckets): always on the worker thread, which sleeps
// between tests of oneCCL's event that found nothing to do (b.idle)
// instead of polling, while the goroutine waits parked, its P free for the
// compute even at GOMAXPROCS=1. The same oneCCL call, so the same result,
// bit for bit; the watchdog and the timeout hold as for any worker call.
func (b *cclBackend) AllreduceIdle(send, recv backend.Buffer, op backend.Op) error {
	return b.allreduce(send, recv, op, true)
}

func (b *cclBackend) Broadcast(buf backend.Buffer, root int) error {
	if root < 0 || root >= b.size {
		return fmt.Errorf("broadcast: root %d out of range for %d ranks", root, b.size)
	}
	return b.call(kBcast, buf.Ptr, nil, buf.Len, buf.Type, 0, root)
}

func (b *cclBackend) Allgather(send, recv backend.Buffer) error {
	if send.Type != recv.Type || recv.Len != b.size*send.Len {
		return fmt.Errorf("allgather: send is %d × %v, receive %d × %v: want %d × %v", send.Len, send.Type, recv.Len, recv.Type, b.size*send.Len, send.Type)
	}
	return b.call(kAllgather, send.Ptr, recv.Ptr, send.Len, send.Type, 0, 0)
}

// ReduceScatter: oneCCL takes custom reductions (our max and min) in
// allreduce only ("custom reduction is supported for allreduce only"), so
// those reduce everything into scratch memory and keep this rank's block,
// as collective's fallback does; sum is oneCCL's reduce_scatter.
func (b *cclBackend) ReduceScatter(send, recv backend.Buffer, op backend.Op) error {
	if send.Type != recv.Type || send.Len != b.size*recv.Len {
		return fmt.Errorf("reducescatter: send is %d × %v, receive %d × %v: want send of %d × %v", send.Len, send.Type, recv.Len, recv.Type, b.size*recv.Len, recv.Type)
	}
	if op == backend.Sum {
		return b.call(kReduceScatter, send.Ptr, recv.Ptr, recv.Len, recv.Type, op, 0)
	}
	words := (send.Len*send.Type.Size() + 7) / 8
	if cap(b.scratch) < words {
		b.scratch = make([]float64, words)
	}
	tmp := backend.Buffer{Ptr: unsafe.Pointer(unsafe.SliceData(b.scratch)), Len: send.Len, Type: send.Type}
	if err := b.call(kAllreduce, send.Ptr, tmp.Ptr, send.Len, send.Type, op, 0); err != nil {
		return err
	}
	k := recv.Len
	copy(recv.Bytes(), tmp.Slice(b.rank*k, (b.rank+1)*k).Bytes())
	return nil
}

func (b *cclBackend) Barrier() error { return b.call(kBarrier, nil, nil, 0, backend.Float32, 0, 0) }

// call makes one collective and waits for it, for the timeout at most, or
// until the watchdog hears of a lost rank: on the calling thread (one cgo
// call, bkccl_direct, which polls oneCCL's event and the abort flag) when
// it moves fewer than handoffAt bytes, else on the worker thread.
func (b *cclBackend) call(k kind, send, recv unsafe.Pointer, count int, t backend.DType, op backend.Op, arg int) error {
	return b.callHow(k, send, recv, count, t, op, arg, false)
}

// callHow is call, or with idle AllreduceIdle's: on the worker whatever
// its size.
func (b *cclBackend) callHow(k kind, send, recv unsafe.Pointer, count int, t backend.DType, op backend.Op, arg int, idle bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return backend.ErrClosed
	}
	if e := b.lost.Load(); e != nil {
		return e
	}
	if b.abandoned {
		return &TimeoutError{Call: callNames[k], Timeout: b.timeout.String()}
	}
	if bytes := callBytes(k, count, t, b.size); bytes < b.handoffAt && !idle {
		return b.direct(k, send, recv, count, t, op, arg, bytes)
	}
	req := handoff.Request{Kind: int(k), DType: int(t), Op: int(op), Arg: arg, Handle: uintptr(b.comm),
		Send: send, Recv: recv, Count: int64(count)}
	if idle {
		req.Idle = b.idle
	}
	rc, msg, err := b.worker.Call(req, time.Now().Add(b.timeout))
	switch {
	case errors.Is(err, handoff.ErrAbandoned):
		if e := b.lost.Load(); e != nil {
			return e
		}
		return &TimeoutError{Call: callNames[k], Timeout: b.timeout.String()}
	case err != nil:
		return err
	case rc != 0:
		return b.cause(&Error{Call: callNames[k], Code: rc, Msg: oneLine(msg)})
	}
	return nil
}

// lostGrace is how long a failed oneCCL call waits for the watchdog's word.
const lostGrace = time.Second

// cause is the lost rank behind a failed call when the watchdog hears of
// one within lostGrace, else err: a dead peer can fail oneCCL's send
// ("SEND entry failed") a moment before its rendezvous connection closes,
// and the rank that died is what a user needs to read (seen in CI over the
// shm transport).
func (b *cclBackend) cause(err error) error {
	for deadline := time.Now().Add(lostGrace); ; time.Sleep(10 * time.Millisecond) {
		if e := b.lost.Load(); e != nil {
			return e
		}
		if time.Now().After(deadline) {
			return err
		}
	}
}

// direct makes the call on this thread (b.mu held).
//
// The buffers go as *C.char, as in the mpi backend: cgo checks what an
// unsafe.Pointer argument points to for Go pointers on every call, and
// cannot hold any behind a *C.char.
func (b *cclBackend) direct(k kind, send, recv unsafe.Pointer, count int, t backend.DType, op backend.Op, arg, bytes int) error {
	m := b.msg
	rc := C.bkccl_direct(C.int(k), C.int(t), C.int(op), C.int(arg), b.comm, (*C.char)(send), (*C.char)(recv),
		C.int64_t(count), b.abort, C.int64_t(b.timeout), &m[0], C.size_t(len(m)))
	switch rc {
	case C.BKCCL_OK:
		if b.yield.After(bytes) {
			runtime.Gosched()
		}
		return nil
	case C.BKCCL_ABORTED, C.BKCCL_TIMEDOUT:
		// The collective is still in oneCCL's hands: its buffers stay
		// pinned, and the backend makes no more calls.
		b.abandoned = true
		for _, p := range [2]unsafe.Pointer{send, recv} {
			if p != nil {
				b.pin.Pin(p)
			}
		}
		if e := b.lost.Load(); e != nil {
			return e
		}
		return &TimeoutError{Call: callNames[k], Timeout: b.timeout.String()}
	case C.BKCCL_ERR_ARG: // a code the shim does not know: this side's bug, no peer's death to wait for
		return m.err(callNames[k], rc)
	}
	return b.cause(m.err(callNames[k], rc))
}

// The paths of cLoop.
const (
	loopRef  = C.BKCCL_LOOP_REF  // as the C++ reference program calls oneCCL
	loopShim = C.BKCCL_LOOP_SHIM // through the shim's direct path
)

// cLoop makes iters float allreduces (sum, out of place) in one cgo call,
// looped in C++ on this thread the way path says, and returns how long
// they took: BenchmarkCCLOverhead's baselines.
func (b *cclBackend) cLoop(path int, send, recv backend.Buffer, iters int) (time.Duration, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var m msgBuf
	t0 := time.Now()
	rc := C.bkccl_loop(C.int(path), b.comm, C.int(send.Type), send.Ptr, recv.Ptr, C.int64_t(send.Len), C.int64_t(iters),
		b.abort, C.int64_t(b.timeout), &m[0], C.size_t(len(m)))
	d := time.Since(t0)
	if rc != C.BKCCL_OK {
		return d, m.err("allreduce loop", rc)
	}
	return d, nil
}

// rawLoop makes iters float allreduces (sum, out of place) straight
// through direct, the cgo call and the yield rule, without the lock, the
// checks or Comm: BenchmarkCCLOverhead's "cgo" window, which splits the Go
// path's cost between the cgo call and the layers above it.
func (b *cclBackend) rawLoop(send, recv backend.Buffer, iters int) (time.Duration, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bytes := send.Len * send.Type.Size()
	t0 := time.Now()
	for range iters {
		if err := b.direct(kAllreduce, send.Ptr, recv.Ptr, send.Len, send.Type, backend.Sum, 0, bytes); err != nil {
			return time.Since(t0), err
		}
	}
	return time.Since(t0), nil
}

// callBytes is what a call moves on this rank: the whole buffer, for
// allgather and reduce-scatter every rank's block.
func callBytes(k kind, count int, t backend.DType, ranks int) int {
	bytes := count * t.Size()
	if k == kAllgather || k == kReduceScatter {
		bytes *= ranks
	}
	return bytes
}
