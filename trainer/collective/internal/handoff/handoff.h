// The worker thread a cgo backend hands its large (or every) call to: see
// handoff.go. Included by the backends' own C, which define the call.
#ifndef BATCHKIT_HANDOFF_H
#define BATCHKIT_HANDOFF_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { BK_HANDOFF_MSG_LEN = 1024 };

// bk_request is one collective as a backend's call function reads it. The
// buffers travel as integers: Go storing a pointer into C memory runs a
// write barrier on the slot's old value, a buffer the GC may have freed
// since ("found bad pointer in Go heap").
typedef struct bk_request {
	int kind, t, op, arg;
	uintptr_t h, send, recv;
	int64_t count, max, iters;
	int64_t idle_min, idle_max; // > 0: a call beside compute, waited for as idle.h says
} bk_request;

// bk_call_fn makes the call once and returns the backend's own code (0 is
// success); it may leave a message of at most len-1 bytes in msg.
typedef int (*bk_call_fn)(const bk_request *req, char *msg, size_t len);

// bk_worker is in C memory: Go fills req while the thread waits.
typedef struct bk_worker {
	pthread_t th;
	int req_fd;  // the thread reads requests here (blocking) till end of file
	int done_fd; // and writes each call's int32 result here
	bk_call_fn fn;
	bk_request req;
	char msg[BK_HANDOFF_MSG_LEN];
} bk_worker;

int bk_worker_start(bk_worker *w, bk_call_fn fn, int req_fd, int done_fd);
void bk_worker_join(bk_worker *w);
int bk_worker_wait(int fd, int fail);

#ifdef __cplusplus
}
#endif

#endif
