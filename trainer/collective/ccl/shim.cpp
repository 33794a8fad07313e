//go:build ccl

// The shim: see shim.h.

#include "shim.h"

#include <oneapi/ccl.hpp>

#include <time.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>

#include "idle.h"
#include "reduce.h"

static_assert(ccl::kvs::address_max_size == BKCCL_ADDR_LEN, "collective: oneCCL's KVS address size changed");
static_assert(sizeof(float) == 4 && sizeof(double) == 8, "collective: C float/double cannot carry Go float32/float64");

namespace {

using kvs_ptr = ccl::shared_ptr_class<ccl::kvs>;

void put(char *msg, size_t len, const char *what, const char *text) {
	if (msg && len)
		snprintf(msg, len, "%s%s", what, text);
}

// guard runs f, turning whatever it throws into a code and a message.
template <class F>
int guard(char *msg, size_t len, F &&f) {
	try {
		f();
		return BKCCL_OK;
	} catch (const ccl::exception &e) {
		put(msg, len, "", e.what());
		return BKCCL_ERR_CCL;
	} catch (const std::exception &e) {
		put(msg, len, "", e.what());
		return BKCCL_ERR_STD;
	} catch (...) {
		put(msg, len, "", "an exception that is not a std::exception");
		return BKCCL_ERR_UNKNOWN;
	}
}

// oneCCL's own max and min are std::max and std::min (comp.cpp), whose
// NaN and signed-zero results depend on operand order: custom reductions
// with math.Max's rules instead (reduce.h).
template <class T, T (*op)(T, T)>
void reduce_into(const void *in, size_t n, void *inout) {
	const T *a = static_cast<const T *>(in);
	T *b = static_cast<T *>(inout);
	for (size_t i = 0; i < n; i++)
		b[i] = op(a[i], b[i]);
}

void bk_ccl_max(const void *in, size_t n, void *inout, size_t *out_n, ccl::datatype dt, const ccl::fn_context *) {
	if (dt == ccl::datatype::float64)
		reduce_into<double, bk_max64>(in, n, inout);
	else
		reduce_into<float, bk_max32>(in, n, inout);
	if (out_n)
		*out_n = n;
}

void bk_ccl_min(const void *in, size_t n, void *inout, size_t *out_n, ccl::datatype dt, const ccl::fn_context *) {
	if (dt == ccl::datatype::float64)
		reduce_into<double, bk_min64>(in, n, inout);
	else
		reduce_into<float, bk_min32>(in, n, inout);
	if (out_n)
		*out_n = n;
}

bool dtype(int t, ccl::datatype *out) {
	switch (t) {
	case BKCCL_F32: *out = ccl::datatype::float32; return true;
	case BKCCL_F64: *out = ccl::datatype::float64; return true;
	}
	return false;
}

// reduction is the op and, for max and min, the custom function.
bool reduction(int op, ccl::reduction *r, ccl::reduction_fn *fn) {
	*fn = nullptr;
	switch (op) {
	case BKCCL_SUM: *r = ccl::reduction::sum; return true;
	case BKCCL_MAX: *r = ccl::reduction::custom, *fn = bk_ccl_max; return true;
	case BKCCL_MIN: *r = ccl::reduction::custom, *fn = bk_ccl_min; return true;
	}
	return false;
}

int bad(char *msg, size_t len, const char *what, int v) {
	if (msg && len)
		snprintf(msg, len, "bkccl: unknown %s %d", what, v);
	return BKCCL_ERR_ARG;
}

int64_t mono_ns() {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// finish waits for e as event::wait does (with CCL_WORKER_OFFLOAD=0 each
// test() is one pass of oneCCL's progress on this thread, which is all
// wait() does in a loop), but gives up when *abort is set (the watchdog
// heard of a dead rank) or timeout_ns passes: oneCCL's own wait would spin
// for ever. The clock is read every 256 passes, the first time after 256,
// not at the start: a read is a system call on a machine without a vDSO
// clock (~0.4 µs on this project's VM, 8 % of an 8-byte allreduce), and a
// call that ends sooner cannot have timed out. So the timeout counts from
// the 256th pass, a few µs to ms late. With idle (a call beside compute,
// on the worker: bkccl_call of a request with idle_min > 0) it sleeps
// after passes that found nothing to do (idle.h).
//
// When oneCCL throws while waiting (a peer's connection failed), the event
// is left alone too before the exception goes on: destroying it would wait
// for it and throw again, from a destructor, which ends the process.
int finish(ccl::event &e, const int32_t *abort, int64_t timeout_ns, bk_idle *idle) {
	try {
		if (!abort && timeout_ns <= 0 && !idle) {
			e.wait();
			return BKCCL_OK;
		}
		int64_t deadline = 0;
		for (unsigned i = 1; !e.test(); i++) {
			if (abort && __atomic_load_n(abort, __ATOMIC_RELAXED))
				return BKCCL_ABORTED;
			if (timeout_ns > 0 && (idle || i % 256 == 0)) {
				if (!deadline)
					deadline = mono_ns() + timeout_ns;
				else if (mono_ns() > deadline)
					return BKCCL_TIMEDOUT;
			}
			if (idle)
				bk_idle_wait(idle);
		}
		return BKCCL_OK;
	} catch (...) {
		new ccl::event(std::move(e));
		throw;
	}
}

// with_fn is the attributes of a call with a custom reduction. Only such a
// call builds them: create_operation_attr is work the C++ reference, with
// oneCCL's defaults, does not do.
template <class Attr, class Id, Id id>
Attr with_fn(ccl::reduction_fn fn) {
	auto attr = ccl::create_operation_attr<Attr>();
	attr.template set<id>(fn);
	return attr;
}

// start begins one collective and returns its event, built by the call
// itself: a default-constructed ccl::event allocates an empty
// implementation that the assignment of the call's event then frees, a
// malloc and a free a call that the reference does not make. kind is one
// of the BKCCL_ kinds (run checks).
ccl::event start(int kind, ccl::datatype dt, ccl::reduction red, ccl::reduction_fn fn, int arg,
                 const ccl::communicator &comm, void *send, void *recv, size_t n) {
	switch (kind) {
	case BKCCL_ALLREDUCE:
		if (!fn)
			return ccl::allreduce(send, recv, n, dt, red, comm);
		return ccl::allreduce(send, recv, n, dt, red, comm,
		                      with_fn<ccl::allreduce_attr, ccl::allreduce_attr_id, ccl::allreduce_attr_id::reduction_fn>(fn));
	case BKCCL_BCAST: return ccl::broadcast(send, n, dt, arg, comm);
	case BKCCL_ALLGATHER: return ccl::allgather(send, recv, n, dt, comm);
	case BKCCL_REDUCE_SCATTER:
		if (!fn)
			return ccl::reduce_scatter(send, recv, n, dt, red, comm);
		return ccl::reduce_scatter(
		    send, recv, n, dt, red, comm,
		    with_fn<ccl::reduce_scatter_attr, ccl::reduce_scatter_attr_id, ccl::reduce_scatter_attr_id::reduction_fn>(fn));
	case BKCCL_BARRIER:
	default: // run has checked the kind
		return ccl::barrier(comm);
	}
}

// run makes one collective (see bkccl_call and bkccl_direct).
int run(int kind, int t, int op, int arg, uintptr_t h, void *send, void *recv, int64_t count, const int32_t *abort,
        int64_t timeout_ns, bk_idle *idle, char *msg, size_t len) {
	ccl::datatype dt = ccl::datatype::float32;
	ccl::reduction red = ccl::reduction::sum;
	ccl::reduction_fn fn = nullptr;
	if (kind < BKCCL_ALLREDUCE || kind > BKCCL_BARRIER)
		return bad(msg, len, "collective", kind);
	if (kind != BKCCL_BARRIER && !dtype(t, &dt))
		return bad(msg, len, "type", t);
	if ((kind == BKCCL_ALLREDUCE || kind == BKCCL_REDUCE_SCATTER) && !reduction(op, &red, &fn))
		return bad(msg, len, "op", op);
	const ccl::communicator &comm = *reinterpret_cast<const ccl::communicator *>(h);
	int rc = BKCCL_OK;
	int g = guard(msg, len, [&] {
		ccl::event e = start(kind, dt, red, fn, arg, comm, send, recv, static_cast<size_t>(count));
		rc = finish(e, abort, timeout_ns, idle);
		if (rc != BKCCL_OK) {
			// An event destroyed before it completes waits for it
			// (host_event_impl's destructor): this one is left alone.
			new ccl::event(std::move(e));
			put(msg, len, "", rc == BKCCL_ABORTED ? "abandoned: a rank was lost" : "timed out");
		}
	});
	return g != BKCCL_OK ? g : rc;
}

} // namespace

extern "C" {

int bkccl_version(char *out, size_t len) {
	return guard(out, len, [&] {
		auto v = ccl::get_library_version();
		snprintf(out, len, "%u.%u.%u", v.major, v.minor, v.update);
	});
}

int bkccl_init(char *msg, size_t len) {
	return guard(msg, len, [&] { ccl::init(); });
}

int bkccl_main_kvs(uintptr_t *kvs, char *addr, char *msg, size_t len) {
	return guard(msg, len, [&] {
		auto k = ccl::create_main_kvs();
		auto a = k->get_address();
		memcpy(addr, a.data(), a.size());
		*kvs = reinterpret_cast<uintptr_t>(new kvs_ptr(std::move(k)));
	});
}

int bkccl_kvs(const char *addr, uintptr_t *kvs, char *msg, size_t len) {
	return guard(msg, len, [&] {
		ccl::kvs::address_type a;
		memcpy(a.data(), addr, a.size());
		auto k = ccl::create_kvs(a);
		*kvs = reinterpret_cast<uintptr_t>(new kvs_ptr(std::move(k)));
	});
}

int bkccl_kvs_free(uintptr_t kvs, char *msg, size_t len) {
	return guard(msg, len, [&] { delete reinterpret_cast<kvs_ptr *>(kvs); });
}

int bkccl_comm_create(int size, int rank, uintptr_t kvs, uintptr_t *comm, char *msg, size_t len) {
	return guard(msg, len, [&] {
		auto k = *reinterpret_cast<kvs_ptr *>(kvs);
		auto c = ccl::create_communicator(size, rank, k);
		*comm = reinterpret_cast<uintptr_t>(new ccl::communicator(std::move(c)));
	});
}

int bkccl_comm_free(uintptr_t comm, char *msg, size_t len) {
	return guard(msg, len, [&] { delete reinterpret_cast<ccl::communicator *>(comm); });
}

int bkccl_call(const bk_request *req, char *msg, size_t len) {
	void *send = reinterpret_cast<void *>(req->send), *recv = reinterpret_cast<void *>(req->recv);
	if (req->idle_min > 0) {
		bk_idle w = bk_idle_start(req->idle_min, req->idle_max);
		return run(req->kind, req->t, req->op, req->arg, req->h, send, recv, req->count, nullptr, 0, &w, msg, len);
	}
	return run(req->kind, req->t, req->op, req->arg, req->h, send, recv, req->count, nullptr, 0, nullptr, msg, len);
}

int bkccl_direct(int kind, int t, int op, int arg, uintptr_t comm, char *send, char *recv, int64_t count,
                 const int32_t *abort, int64_t timeout_ns, char *msg, size_t len) {
	return run(kind, t, op, arg, comm, send, recv, count, abort, timeout_ns, nullptr, msg, len);
}

int bkccl_loop(int path, uintptr_t comm, int t, void *send, void *recv, int64_t count, int64_t iters,
               const int32_t *abort, int64_t timeout_ns, char *msg, size_t len) {
	ccl::datatype dt;
	if (!dtype(t, &dt))
		return bad(msg, len, "type", t);
	if (path == BKCCL_LOOP_SHIM) {
		for (int64_t i = 0; i < iters; i++) {
			int rc = run(BKCCL_ALLREDUCE, t, BKCCL_SUM, 0, comm, send, recv, count, abort, timeout_ns, nullptr, msg, len);
			if (rc != BKCCL_OK)
				return rc;
		}
		return BKCCL_OK;
	}
	if (path != BKCCL_LOOP_REF)
		return bad(msg, len, "loop", path);
	const ccl::communicator &c = *reinterpret_cast<const ccl::communicator *>(comm);
	size_t n = static_cast<size_t>(count);
	return guard(msg, len, [&] {
		for (int64_t i = 0; i < iters; i++)
			ccl::allreduce(send, recv, n, dt, ccl::reduction::sum, c).wait();
	});
}

} // extern "C"
