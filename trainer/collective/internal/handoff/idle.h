// The wait of a collective made beside compute (collective.AllreduceIdle),
// shared by the mpi and ccl shims: start the call non-blocking, then test
// it until it completes. MPI's and oneCCL's progress engines otherwise poll
// on the calling thread for the whole call: with every core computing (2
// ranks on 2 cores), that poll took the core the backward pass needed.
//
// Progress is made only inside a test, so a test that took time moved data
// (a shared-memory copy, a reduction) and the next one follows at once:
// the transfer runs at full speed. A test that found nothing to do (the
// peer is still computing) is followed by a sleep, from min_ns doubling to
// max_ns. Sleeping after every test instead made MPICH's 4 MB allreduce
// 4× slower: its shared-memory transfer is a pipeline of chunks, each
// needing a test on both sides (docs/performance.md, "Gradient buckets").
// idle.go holds the defaults.
#ifndef BATCHKIT_IDLE_H
#define BATCHKIT_IDLE_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

// BK_IDLE_WORK_NS: a test that took at least this long did work. An empty
// test costs ~0.2 µs here and the two clock reads around it ~0.4 µs each
// (a system call on this project's VM, whose vDSO has no usable clock); a
// 32 KiB copy takes several µs.
enum { BK_IDLE_WORK_NS = 3000 };

typedef struct {
	int64_t min, next, max; // the first sleep, the next, the longest, ns
	int64_t t0;             // when the current test began
} bk_idle;

static inline int64_t bk_idle_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline bk_idle bk_idle_start(int64_t min_ns, int64_t max_ns) {
	int64_t lo = min_ns > 0 ? min_ns : 1;
	bk_idle w = {lo, lo, max_ns > lo ? max_ns : lo, bk_idle_now()};
	return w;
}

// bk_idle_wait follows a test (begun at w->t0) that found the call
// unfinished: at once after one that did work, else after a sleep. It
// marks when the next test begins.
static inline void bk_idle_wait(bk_idle *w) {
	int64_t now = bk_idle_now();
	if (now - w->t0 >= BK_IDLE_WORK_NS) {
		w->next = w->min;
		w->t0 = now;
		return;
	}
	struct timespec ts = {(time_t)(w->next / 1000000000), (long)(w->next % 1000000000)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
	if (w->next < w->max)
		w->next = w->next * 2 < w->max ? w->next * 2 : w->max;
	w->t0 = bk_idle_now();
}

#endif
