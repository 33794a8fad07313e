//go:build mkl && !openblas

/* oneMKL (the mkl and mkl-include wheels of scripts/mkl-wheels.txt). */
#include <mkl_cblas.h>
#include <mkl_service.h>
#include "shim_common.h"

int bkgemm_sgemm(int transA, int transB, long long m, long long n, long long k, float alpha,
                 const float *a, long long lda, const float *b, long long ldb, float beta,
                 float *c, long long ldc, int threads) {
	int rc = bkgemm_check(transA, transB, m, n, k, lda, ldb, ldc, threads);
	if (rc != BKGEMM_OK) return rc;
	/* The count for this OS thread only, put back after the call: a Go
	 * program's goroutines move between threads, and nothing else in the
	 * process is changed. */
	int prev = mkl_set_num_threads_local(threads);
	cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
	            (MKL_INT)m, (MKL_INT)n, (MKL_INT)k, alpha, a, (MKL_INT)lda, b, (MKL_INT)ldb, beta, c, (MKL_INT)ldc);
	mkl_set_num_threads_local(prev);
	return BKGEMM_OK;
}

int bkgemm_set_threads(int threads, int *got) {
	if (threads < 1) return BKGEMM_ETHREADS;
	int prev = mkl_set_num_threads_local(threads);
	*got = mkl_get_max_threads();
	mkl_set_num_threads_local(prev);
	return BKGEMM_OK;
}

int bkgemm_version(char *buf, int len) {
	if (len < 1) return BKGEMM_ERANGE;
	mkl_get_version_string(buf, len);
	buf[len - 1] = '\0';
	return BKGEMM_OK;
}
