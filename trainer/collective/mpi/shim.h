//go:build (mpi || mpich) && !(mpi && mpich)

// The C side of the MPI backend (shim.c): what the Go binding (mpi.go)
// calls. Named shim.h, not mpi.h: the package directory is on cgo's
// include path, where an mpi.h would shadow the library's <mpi.h>.
//
// MPI handles are pointers in Open MPI and ints in MPICH, and MPI_FLOAT,
// MPI_SUM, MPI_COMM_WORLD, ... are macros cgo cannot use, so Go never
// touches a handle or a predefined object: the functions below take int
// codes (the values of DType and Op) and a communicator carried as a
// uintptr_t, and each makes exactly one MPI call (the collectives loop only
// to chunk counts above INT_MAX). Every one returns MPI's return code,
// which the Go side checks and turns into an *Error.
#ifndef BATCHKIT_MPI_SHIM_H
#define BATCHKIT_MPI_SHIM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "handoff.h"

#if defined(BK_WANT_OPEN_MPI) && !defined(OPEN_MPI)
#error "collective: built with -tags mpi (Open MPI) but mpi.h is not Open MPI's: check pkg-config ompi"
#endif
#if defined(BK_WANT_MPICH) && defined(OPEN_MPI)
#error "collective: built with -tags mpich (MPICH) but mpi.h is Open MPI's: check pkg-config mpich"
#endif

// The values of backend.DType and backend.Op (asserted in Go).
enum { BK_F32 = 1, BK_F64 = 2 };
enum { BK_SUM = 1, BK_MAX = 3, BK_MIN = 4 };
enum { BK_THREAD_SERIALIZED = MPI_THREAD_SERIALIZED, BK_MAX_ERROR_STRING = MPI_MAX_ERROR_STRING };

// The collectives bk_call makes (the values of mpiKind).
enum { BK_ALLREDUCE = 1, BK_BCAST = 2, BK_ALLGATHER = 3, BK_REDUCE_SCATTER = 4, BK_BARRIER = 5 };

// ---- set-up and tear-down: one MPI call each, so errors name the call.
int bk_create_ops(void);
int bk_free_ops(void);
uintptr_t bk_comm_world(void);
int bk_errors_return(uintptr_t h);
int bk_comm_rank(uintptr_t h, int *r);
int bk_comm_size(uintptr_t h, int *s);
int bk_comm_dup(uintptr_t h, uintptr_t *out);
int bk_comm_free(uintptr_t *h);
int bk_init_thread(int *provided);

// bk_call runs one collective, named by kind. count is in elements; arg is
// the in-place flag for allreduce and the root for broadcast; max is the
// largest count one MPI call may carry (INT_MAX; lowered by tests to
// exercise the chunking).
int bk_call(int kind, uintptr_t h, char *send, char *recv, int64_t count, int t, int op, int arg, int64_t max);

// bk_allreduce_idle is bk_call's allreduce for a call made beside compute
// (collective.AllreduceIdle): MPI_Iallreduce, then MPI_Test with sleeps
// between tests that found nothing to do (idle.h), so that the waiting
// thread leaves the core to the rank's compute. bk_mpi_call makes it for
// a request with idle_min > 0.
int bk_allreduce_idle(uintptr_t h, char *send, char *recv, int64_t count, int t, int op, int inplace, int64_t max,
                      int64_t sleep_min_ns, int64_t sleep_max_ns);

// bk_mpi_call is bk_call as the shared worker thread runs it (a
// bk_call_fn, see internal/handoff): the message stays empty, the Go side
// asks MPI_Error_string for the text.
int bk_mpi_call(const bk_request *req, char *msg, size_t len);

// bk_abort is what an MPI library does on a fatal transport error (tests).
void bk_abort(void);

// ---- errors.
int bk_error_string(int rc, char *buf);
const char *bk_class_name(int rc);

#endif
