// Package handoff is the worker thread a cgo backend (mpi, ccl) makes its
// calls on while the calling goroutine waits in the netpoller: one C thread
// per worker, fed through two pipes.
//
// Why a thread of our own: a call that outlasts the Go runtime's 10 ms
// sysmon limit loses its P and sets sysmon polling every 20 µs on the core
// the rank busy-polls on (docs/mpi-backend.md has the measurements); on the
// worker the goroutine is parked and sysmon sleeps. And a call on the
// worker can be given up on (Interrupt, or a deadline): the goroutine
// returns an error while the thread stays in the library, which is how a
// backend reports a dead peer instead of hanging in a library that never
// returns.
//
// Every step of a hand-over is a raw system call or a memory store, none of
// them a cgo call or a syscall.Syscall: those tell the runtime a system
// call begins, which wakes a sleeping sysmon. The backend's C defines the
// call (a bk_call_fn, see handoff.h) and passes its address to Start.
package handoff

/*
#cgo nocallback bk_worker_start
#cgo nocallback bk_worker_join
#cgo nocallback bk_worker_wait
#include <stdlib.h>
#include "handoff.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Request is one call, as the backend's C function reads it (bk_request).
// Send and Recv are pinned for as long as the thread may use them.
type Request struct {
	Kind, DType, Op, Arg int
	Handle               uintptr
	Send, Recv           unsafe.Pointer
	Count, Max           int64
	Iters                int64 // calls in a row (benchmarks); 0 is one
	// Idle, when set, is a call made beside compute: the backend's C
	// waits for it with these sleeps between tests (idle.h).
	Idle IdlePoll
}

// Lost is the result code of a call whose result could not be read back
// (it cannot happen with pipes we own); the backend maps it to its own
// internal error.
const Lost = -1 << 30

// ErrAbandoned: the goroutine stopped waiting for a call that has not
// returned (Interrupt, or the deadline passed). The thread may still be in
// the library, with the buffers: the worker takes no more calls.
var ErrAbandoned = errors.New("handoff: call abandoned")

// ErrNotSent: the request could not be written to the thread's pipe (it
// cannot happen with a pipe we own, with room), so the call was not made
// and nothing holds the buffers: the caller may make it another way (the
// mpi backend makes it on its own thread).
var ErrNotSent = errors.New("handoff: request not sent to the worker thread")

// Buffers go to the thread as integers, never as Go pointers stored in C
// memory: such a store runs the GC's write barrier on the slot's old value,
// a buffer the collector may have freed since ("found bad pointer in Go
// heap", once in CI with the mpi backend). A compile error here means a
// buffer field of bk_request became a pointer.
var _ = func(r *C.bk_request) (C.uintptr_t, C.uintptr_t) { return r.send, r.recv }

// Worker is the Go side of one worker thread.
type Worker struct {
	c       *C.bk_worker    // C memory: the request, the message, the thread
	req     int             // the request pipe's write end (blocking)
	reqRead int             // its read end, the thread's
	done    *os.File        // the result pipe's read end, in the netpoller
	doneW   *os.File        // its write end, the thread's
	raw     syscall.RawConn // done's
	pin     runtime.Pinner

	interrupted atomic.Bool
	broken      bool // a call was abandoned or its result lost: no more calls
}

// Start makes the pipes and starts the thread, which runs fn (the address
// of the backend's C bk_call_fn) for each call.
func Start(fn unsafe.Pointer) (*Worker, error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("handoff: pipe: %w", err)
	}
	w := &Worker{reqRead: fds[0], req: fds[1]}
	w.c = (*C.bk_worker)(C.calloc(1, C.size_t(unsafe.Sizeof(C.bk_worker{}))))
	var err error
	if w.done, w.doneW, err = os.Pipe(); err == nil {
		w.raw, err = w.done.SyscallConn()
	}
	if err == nil {
		if e := C.bk_worker_start(w.c, C.bk_call_fn(fn), C.int(w.reqRead), C.int(w.doneW.Fd())); e != 0 {
			err = fmt.Errorf("handoff: pthread_create: %w", syscall.Errno(e))
		}
	}
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// close closes whatever pipe ends exist and frees the C memory (the thread
// is not running).
func (w *Worker) close() {
	syscall.Close(w.req)
	syscall.Close(w.reqRead)
	if w.done != nil {
		w.done.Close()
		w.doneW.Close()
	}
	C.free(unsafe.Pointer(w.c))
}

// Stop ends the thread (end of file on its request pipe) and closes the
// pipes. A worker whose thread is stuck in a call is left as it is: the
// thread cannot be joined, and the process is about to end.
func (w *Worker) Stop() {
	if w == nil {
		return
	}
	if w.broken {
		syscall.Close(w.req)
		return
	}
	syscall.Close(w.req)
	w.req = -1
	C.bk_worker_join(w.c)
	w.close()
}

// Broken reports whether the worker takes no more calls.
func (w *Worker) Broken() bool { return w.broken }

// Interrupt makes the call in flight, and every later one, return
// ErrAbandoned. Safe from any goroutine (the watchdog's).
func (w *Worker) Interrupt() {
	w.interrupted.Store(true)
	w.done.SetReadDeadline(time.Unix(1, 0))
}

// Call makes r on the thread and waits for it until deadline (zero: no
// limit) or Interrupt. It returns the call's code and, when it is not 0,
// the message the C function left. Calls must not overlap (the backends
// hold a lock around them).
func (w *Worker) Call(r Request, deadline time.Time) (rc int, msg string, err error) {
	if w.broken {
		return 0, "", ErrAbandoned
	}
	w.done.SetReadDeadline(deadline)
	if w.interrupted.Load() {
		w.broken = true
		return 0, "", ErrAbandoned
	}
	// The thread reads these pointers from C memory: pinned till it is done.
	for _, p := range [2]unsafe.Pointer{r.Send, r.Recv} {
		if p != nil {
			w.pin.Pin(p)
		}
	}
	req := &w.c.req
	req.kind, req.t, req.op, req.arg = C.int(r.Kind), C.int(r.DType), C.int(r.Op), C.int(r.Arg)
	req.h, req.send, req.recv = C.uintptr_t(r.Handle), C.uintptr_t(uintptr(r.Send)), C.uintptr_t(uintptr(r.Recv))
	req.count, req.max, req.iters = C.int64_t(r.Count), C.int64_t(r.Max), C.int64_t(r.Iters)
	req.idle_min, req.idle_max = C.int64_t(r.Idle.Min.Nanoseconds()), C.int64_t(r.Idle.Max.Nanoseconds())
	if !rawWrite(w.req, 'r') { // cannot happen: a pipe we own, with room
		w.pin.Unpin()
		return 0, "", ErrNotSent
	}
	rc, err = w.result()
	if err != nil {
		// The buffers stay pinned: the thread may still write them.
		w.broken = true
		return 0, "", err
	}
	w.pin.Unpin()
	if rc != 0 {
		msg = C.GoString(&w.c.msg[0])
	}
	return rc, msg, nil
}

// result waits in the netpoller for the thread's int32 result.
func (w *Worker) result() (int, error) {
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
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && got == 0:
		return 0, ErrAbandoned
	case err != nil || got != len(res):
		// Cannot happen with pipes we own (a 4-byte write to a pipe is
		// atomic); the thread may still be using the buffers, so wait for
		// it in C, and make no more calls.
		w.broken = true
		if got != 0 {
			return Lost, nil
		}
		return int(C.bk_worker_wait(C.int(w.done.Fd()), C.int(Lost))), nil
	}
	return int(int32(binary.NativeEndian.Uint32(res[:]))), nil
}

// rawWrite writes one byte with a raw system call (see the package comment).
func rawWrite(fd int, b byte) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b)), 1)
		if e == syscall.EINTR {
			continue
		}
		return e == 0 && n == 1
	}
}
