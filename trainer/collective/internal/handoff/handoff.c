#include "handoff.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

// One request at a time: the Go side writes the request into w->req, then
// one byte to the request pipe; the thread makes the call iters times (0 is
// once) and writes its int32 result to the done pipe. Both sides of a call
// are plain memory and pipe traffic, no cgo call (see handoff.go for why).
static void *bk_worker_main(void *arg) {
	bk_worker *w = arg;
	for (;;) {
		char b;
		ssize_t n = read(w->req_fd, &b, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != 1)
			return NULL;
		w->msg[0] = 0;
		int64_t iters = w->req.iters > 0 ? w->req.iters : 1;
		int rc = 0;
		for (int64_t i = 0; i < iters && rc == 0; i++)
			rc = w->fn(&w->req, w->msg, sizeof w->msg);
		w->msg[sizeof w->msg - 1] = 0;
		int32_t r = rc;
		while (write(w->done_fd, &r, sizeof r) < 0 && errno == EINTR)
			;
	}
}

// bk_worker_start starts the thread with every signal blocked (signals
// belong to Go's threads). It returns 0 or the error number.
int bk_worker_start(bk_worker *w, bk_call_fn fn, int req_fd, int done_fd) {
	w->fn = fn, w->req_fd = req_fd, w->done_fd = done_fd;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int err = pthread_create(&w->th, NULL, bk_worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

// bk_worker_join waits for the thread to end (after the Go side has closed
// the request pipe).
void bk_worker_join(bk_worker *w) { pthread_join(w->th, NULL); }

// bk_worker_wait reads a call's result from the done pipe, waiting with
// poll: the Go side's fallback when its own read failed. A result it cannot
// read becomes fail.
int bk_worker_wait(int fd, int fail) {
	int32_t r = fail;
	char buf[sizeof r];
	for (size_t got = 0; got < sizeof r;) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return fail;
		ssize_t n = read(fd, buf + got, sizeof r - got);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return fail;
		if (n > 0)
			got += n;
	}
	memcpy(&r, buf, sizeof r);
	return r;
}
