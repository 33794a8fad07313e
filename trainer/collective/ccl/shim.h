//go:build ccl

// The extern "C" shim over oneCCL's C++ API (shim.cpp): what the Go
// binding (ccl.go) calls. The oneCCL wheels batchkit installs (oneccl-cpu
// 2021.16) have only the C++ API; the C API (onecclGetUniqueId ...) is in
// libccl.so.2, which only the SYCL wheel ships.
//
// Every function catches every exception oneCCL throws and returns a code
// (BKCCL_OK or one of the errors below) with the exception's text in msg:
// no exception crosses into Go. Handles are heap objects carried as
// uintptr_t.
#ifndef BATCHKIT_CCL_SHIM_H
#define BATCHKIT_CCL_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include "handoff.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	BKCCL_OK = 0,
	BKCCL_ERR_CCL = 1,     // a ccl::exception
	BKCCL_ERR_STD = 2,     // another std::exception
	BKCCL_ERR_UNKNOWN = 3, // anything else thrown
	BKCCL_ERR_ARG = 4,     // a kind, type or op this shim does not know
	BKCCL_ABORTED = 5,     // bkccl_direct: *abort was set while it waited
	BKCCL_TIMEDOUT = 6,    // bkccl_direct: timeout_ns passed while it waited
};

// The values of backend.DType and backend.Op (asserted in Go), and the
// collectives bkccl_call makes.
enum { BKCCL_F32 = 1, BKCCL_F64 = 2 };
enum { BKCCL_SUM = 1, BKCCL_MAX = 3, BKCCL_MIN = 4 };
// The kinds are contiguous: run checks the range.
enum { BKCCL_ALLREDUCE = 1, BKCCL_BCAST = 2, BKCCL_ALLGATHER = 3, BKCCL_REDUCE_SCATTER = 4, BKCCL_BARRIER = 5 };

// The KVS address: ccl::kvs::address_type's size (asserted in shim.cpp).
enum { BKCCL_ADDR_LEN = 256, BKCCL_MSG_LEN = BK_HANDOFF_MSG_LEN };

int bkccl_version(char *out, size_t len);
int bkccl_init(char *msg, size_t len);
int bkccl_main_kvs(uintptr_t *kvs, char *addr, char *msg, size_t len);
int bkccl_kvs(const char *addr, uintptr_t *kvs, char *msg, size_t len);
int bkccl_kvs_free(uintptr_t kvs, char *msg, size_t len);
int bkccl_comm_create(int size, int rank, uintptr_t kvs, uintptr_t *comm, char *msg, size_t len);
int bkccl_comm_free(uintptr_t comm, char *msg, size_t len);
// bkccl_call makes one collective: req->kind names it, req->arg is the
// root of a broadcast, req->count the elements (per rank for allgather's
// send and reduce-scatter's receive); req->idle_min > 0 is a call beside
// compute, waited for with sleeps between tests (idle.h) instead of
// polling. A bk_call_fn: the worker runs it.
int bkccl_call(const bk_request *req, char *msg, size_t len);
// bkccl_direct makes the same call on the caller's thread (the Go backend's
// small calls, with no hand-off to wake up twice): it waits by polling the
// event, and returns BKCCL_ABORTED as soon as *abort (C memory the
// watchdog stores 1 in) is set, BKCCL_TIMEDOUT after timeout_ns (0: none).
// The collective is then left in flight: its buffers must stay valid.
// send and recv are char * so that cgo does not check them for Go pointers.
int bkccl_direct(int kind, int t, int op, int arg, uintptr_t comm, char *send, char *recv, int64_t count,
                 const int32_t *abort, int64_t timeout_ns, char *msg, size_t len);

// bkccl_loop makes iters float allreduces (sum, out of place) in a loop on
// the caller's thread, for BenchmarkCCLOverhead: path BKCCL_LOOP_REF as the
// C++ reference does (trainer/bench/reference/ccl_bench.cpp:
// ccl::allreduce(...).wait()), BKCCL_LOOP_SHIM through what bkccl_direct
// runs, with its abort flag and timeout.
enum { BKCCL_LOOP_REF = 1, BKCCL_LOOP_SHIM = 2 };
int bkccl_loop(int path, uintptr_t comm, int t, void *send, void *recv, int64_t count, int64_t iters,
               const int32_t *abort, int64_t timeout_ns, char *msg, size_t len);

#ifdef __cplusplus
}
#endif

#endif
