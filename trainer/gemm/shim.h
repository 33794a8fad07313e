/* The C side of the cgo GEMM binding: one file per library (shim_openblas.c,
 * shim_mkl.c) implements these, and cblas.go calls them. Every function
 * returns a code (BKGEMM_OK or an error below); the Go side turns a non-zero
 * code into a *LibraryError. Dimensions arrive as long long and are checked
 * against the library's int before any call. */
#ifndef BKGEMM_SHIM_H
#define BKGEMM_SHIM_H

enum {
	BKGEMM_OK = 0,
	BKGEMM_ERANGE = 1,   /* a dimension or leading dimension over INT_MAX */
	BKGEMM_ETRANS = 2,   /* a transpose code other than 0 (no) or 1 (yes) */
	BKGEMM_ETHREADS = 3  /* a thread count below 1 */
};

/* C = alpha*op(A)*op(B) + beta*C, row-major; transA/transB 1 = transposed.
 * threads: the most threads the call may use (MKL: set for this call on this
 * thread only; OpenBLAS: ignored, bkgemm_set_threads set it for the process). */
int bkgemm_sgemm(int transA, int transB, long long m, long long n, long long k, float alpha,
                 const float *a, long long lda, const float *b, long long ldb, float beta,
                 float *c, long long ldc, int threads);

/* bkgemm_set_threads: OpenBLAS: set the process's thread count. MKL: nothing
 * to set (per call). Both write into *got the count a call with threads
 * threads runs with, as the library reports it. */
int bkgemm_set_threads(int threads, int *got);

/* The loaded library's version text, NUL-terminated, cut to len bytes. */
int bkgemm_version(char *buf, int len);

#endif
