// The wait of a collective made beside compute (collective.AllreduceIdle),
// shared by the mpi and ccl shims: start the call non-blocking, then test
// it and sleep between tests, the sleep doubling from min_ns to max_ns.
// MPI's and oneCCL's progress engines otherwise poll on the calling
// thread for the whole call: with every core computing (2 ranks on 2
// cores), that poll took the core the backward pass needed. Progress is
// made only inside a test, so the sleep trades the call's latency
// (it ends up to one sleep late) against the CPU it frees
// (docs/performance.md, "Gradient buckets"). idle.go holds the defaults.
#ifndef BATCHKIT_IDLE_H
#define BATCHKIT_IDLE_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

typedef struct {
	int64_t next, max; // the next sleep and the longest, ns
} bk_idle;

static inline bk_idle bk_idle_start(int64_t min_ns, int64_t max_ns) {
	bk_idle w = {min_ns > 0 ? min_ns : 1, max_ns > min_ns ? max_ns : min_ns};
	return w;
}

// bk_idle_sleep sleeps once, after a test that found the call unfinished.
static inline void bk_idle_sleep(bk_idle *w) {
	struct timespec ts = {(time_t)(w->next / 1000000000), (long)(w->next % 1000000000)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
	if (w->next < w->max)
		w->next = w->next * 2 < w->max ? w->next * 2 : w->max;
}

#endif
