//go:build openblas && !mkl

/* OpenBLAS (Debian's libopenblas-dev: cblas.h and libopenblas). */
#include <string.h>
#include <cblas.h>
#include "shim_common.h"

int bkgemm_sgemm(int transA, int transB, long long m, long long n, long long k, float alpha,
                 const float *a, long long lda, const float *b, long long ldb, float beta,
                 float *c, long long ldc, int threads) {
	int rc = bkgemm_check(transA, transB, m, n, k, lda, ldb, ldc, threads);
	if (rc != BKGEMM_OK) return rc;
	cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
	            (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
	return BKGEMM_OK;
}

int bkgemm_set_threads(int threads, int *got) {
	if (threads < 1) return BKGEMM_ETHREADS;
	openblas_set_num_threads(threads);
	*got = openblas_get_num_threads();
	return BKGEMM_OK;
}

int bkgemm_version(char *buf, int len) {
	const char *v = openblas_get_config();
	if (len < 1) return BKGEMM_ERANGE;
	strncpy(buf, v ? v : "", (size_t)len - 1);
	buf[len - 1] = '\0';
	return BKGEMM_OK;
}
