//go:build (mpi || mpich) && !(mpi && mpich)

// The MPI backend's C: see shim.h. Compiled by cgo with the flags of
// mpi.go's #cgo lines (the library's pkg-config), and only under the same
// build tags.

#include "shim.h"

#include <stdlib.h>
#include <string.h>

#include "idle.h"
#include "reduce.h"

// Go's float32 and float64 travel as MPI_FLOAT and MPI_DOUBLE.
_Static_assert(sizeof(float) == 4, "collective: C float is not 4 bytes, MPI_FLOAT cannot carry Go float32");
_Static_assert(sizeof(double) == 8, "collective: C double is not 8 bytes, MPI_DOUBLE cannot carry Go float64");
_Static_assert(sizeof(MPI_Comm) <= sizeof(uintptr_t), "collective: MPI_Comm does not fit in uintptr_t");

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

// Max and Min are Go's math.Max and math.Min (bk_max64 ... in the shared
// reduce.h), not MPI_MAX and MPI_MIN: those leave NaN and -0 vs +0 to
// operand order (x > y ? x : y), which differs between ranks, so ranks
// could end with different bits. A NaN result is always math.NaN()'s bits,
// as in the TCP backend (backend.Reduce).
static MPI_Op bk_max_op = MPI_OP_NULL, bk_min_op = MPI_OP_NULL;

// MPI_User_function: inout[i] = in[i] op inout[i]. Only MPI_FLOAT and
// MPI_DOUBLE reach these (bk_type).
static void bk_max_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
	int n = *len;
	if (*dt == MPI_FLOAT) {
		float *a = in, *b = inout;
		for (int i = 0; i < n; i++) b[i] = bk_max32(a[i], b[i]);
	} else {
		double *a = in, *b = inout;
		for (int i = 0; i < n; i++) b[i] = bk_max64(a[i], b[i]);
	}
}
static void bk_min_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
	int n = *len;
	if (*dt == MPI_FLOAT) {
		float *a = in, *b = inout;
		for (int i = 0; i < n; i++) b[i] = bk_min32(a[i], b[i]);
	} else {
		double *a = in, *b = inout;
		for (int i = 0; i < n; i++) b[i] = bk_min64(a[i], b[i]);
	}
}

// bk_create_ops makes the two ops (commutative) once MPI is initialised.
int bk_create_ops(void) {
	int rc = MPI_Op_create(bk_max_fn, 1, &bk_max_op);
	if (rc != MPI_SUCCESS)
		return rc;
	rc = MPI_Op_create(bk_min_fn, 1, &bk_min_op);
	if (rc != MPI_SUCCESS) {
		MPI_Op_free(&bk_max_op);
		bk_max_op = MPI_OP_NULL;
	}
	return rc;
}
int bk_free_ops(void) {
	int rc = MPI_SUCCESS, rc2 = MPI_SUCCESS;
	if (bk_max_op != MPI_OP_NULL)
		rc = MPI_Op_free(&bk_max_op);
	if (bk_min_op != MPI_OP_NULL)
		rc2 = MPI_Op_free(&bk_min_op);
	bk_max_op = bk_min_op = MPI_OP_NULL;
	return rc != MPI_SUCCESS ? rc : rc2;
}

static inline MPI_Op bk_op(int op) {
	switch (op) {
	case BK_SUM: return MPI_SUM;
	case BK_MAX: return bk_max_op;
	case BK_MIN: return bk_min_op;
	}
	return MPI_OP_NULL;
}
static inline MPI_Comm bk_comm(uintptr_t h) { return (MPI_Comm)h; }

// ---- set-up and tear-down: one MPI call each, so errors name the call.

uintptr_t bk_comm_world(void) { return (uintptr_t)MPI_COMM_WORLD; }
int bk_errors_return(uintptr_t h) { return MPI_Comm_set_errhandler(bk_comm(h), MPI_ERRORS_RETURN); }
int bk_comm_rank(uintptr_t h, int *r) { return MPI_Comm_rank(bk_comm(h), r); }
int bk_comm_size(uintptr_t h, int *s) { return MPI_Comm_size(bk_comm(h), s); }
int bk_comm_dup(uintptr_t h, uintptr_t *out) {
	MPI_Comm c = MPI_COMM_NULL;
	int rc = MPI_Comm_dup(bk_comm(h), &c);
	*out = (uintptr_t)c;
	return rc;
}
int bk_comm_free(uintptr_t *h) {
	MPI_Comm c = bk_comm(*h);
	int rc = MPI_Comm_free(&c);
	*h = (uintptr_t)c;
	return rc;
}
int bk_init_thread(int *provided) { return MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, provided); }

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

// bk_iallreduce_wait: one MPI_Iallreduce of at most max elements, waited
// for as idle.h says.
static int bk_iallreduce_wait(const void *s, void *r, int n, MPI_Datatype dt, MPI_Op o, MPI_Comm c, bk_idle *w) {
	MPI_Request req = MPI_REQUEST_NULL;
	int rc = MPI_Iallreduce(s, r, n, dt, o, c, &req);
	for (int done = 0; rc == MPI_SUCCESS;) {
		rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS || done)
			break;
		bk_idle_wait(w);
	}
	return rc;
}

int bk_allreduce_idle(uintptr_t h, char *send, char *recv, int64_t count, int t, int op, int inplace, int64_t max,
                      int64_t sleep_min_ns, int64_t sleep_max_ns) {
	MPI_Comm c = bk_comm(h);
	MPI_Datatype dt = bk_type(t);
	MPI_Op o = bk_op(op);
	size_t es = bk_size(t);
	for (int64_t off = 0; off == 0 || off < count; off += max) {
		int64_t n = count - off < max ? count - off : max;
		bk_idle w = bk_idle_start(sleep_min_ns, sleep_max_ns);
		const void *s = inplace ? MPI_IN_PLACE : (void *)(send + (size_t)off * es);
		int rc = bk_iallreduce_wait(s, recv + (size_t)off * es, (int)n, dt, o, c, &w);
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

// bk_call runs one collective, named by kind (the values of mpiKind). arg is
// the in-place flag for allreduce and the root for broadcast.
int bk_call(int kind, uintptr_t h, char *send, char *recv, int64_t count, int t, int op, int arg, int64_t max) {
	switch (kind) {
	case BK_ALLREDUCE: return bk_allreduce(h, send, recv, count, t, op, arg, max);
	case BK_BCAST: return bk_bcast(h, send, count, t, arg, max);
	case BK_ALLGATHER: return bk_allgather(h, send, recv, (int)count, t);
	case BK_REDUCE_SCATTER: return bk_reduce_scatter_block(h, send, recv, (int)count, t, op);
	case BK_BARRIER: return MPI_Barrier(bk_comm(h));
	}
	return MPI_ERR_ARG;
}

int bk_mpi_call(const bk_request *r, char *msg, size_t len) {
	(void)msg, (void)len;
	if (r->kind == BK_ALLREDUCE && r->idle_min > 0)
		return bk_allreduce_idle(r->h, (char *)r->send, (char *)r->recv, r->count, r->t, r->op, r->arg, r->max,
		                         r->idle_min, r->idle_max);
	return bk_call(r->kind, r->h, (char *)r->send, (char *)r->recv, r->count, r->t, r->op, r->arg, r->max);
}

void bk_abort(void) { abort(); }

// ---- errors.

int bk_error_string(int rc, char *buf) {
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
const char *bk_class_name(int rc) {
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
