/* What both shims share: the argument checks before a cblas call. */
#ifndef BKGEMM_SHIM_COMMON_H
#define BKGEMM_SHIM_COMMON_H
#include <limits.h>
#include "shim.h"

static int bkgemm_check(int transA, int transB, long long m, long long n, long long k,
                        long long lda, long long ldb, long long ldc, int threads) {
	if ((transA != 0 && transA != 1) || (transB != 0 && transB != 1)) return BKGEMM_ETRANS;
	if (threads < 1) return BKGEMM_ETHREADS;
	if (m < 0 || n < 0 || k < 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX ||
	    lda < 1 || ldb < 1 || ldc < 1 || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
		return BKGEMM_ERANGE;
	return BKGEMM_OK;
}
#endif
