//go:build openblas || mkl

/* Vectorised by the compiler (AVX2 where the CPU has it, SSE otherwise);
 * fp-contract=off keeps every multiply and add rounded on its own, so the
 * result is bit for bit Go's sgdGo (TestSGDKernelBitIdentical). */
#pragma GCC optimize("O3", "fp-contract=off")
#include "optim.h"

/* bad ORs "p is not finite" (p-p != p-p only for NaN, and ±Inf-±Inf is
 * NaN), an integer reduction the vectoriser keeps in a register. */
#define BK_SGD_LOOP(CLEAR)                            \
	int bad = 0;                                      \
	for (size_t i = 0; i < n; i++) {                  \
		float d = g[i] + weight_decay * p[i];         \
		CLEAR;                                        \
		buf[i] = momentum * buf[i] + d;               \
		p[i] -= lr * buf[i];                          \
		float z = p[i] - p[i];                        \
		bad |= z != z;                                \
	}                                                 \
	return bad;

/* One function per loop, so that no branch is left in the vector loop. */
#define BK_SGD_KERNEL(NAME, ATTR, CLEAR)                                                    \
	ATTR static int NAME(float *restrict p, float *restrict g, float *restrict buf, size_t n, \
	                     float lr, float momentum, float weight_decay) {                      \
		BK_SGD_LOOP(CLEAR)                                                                    \
	}

BK_SGD_KERNEL(sgd_avx2, __attribute__((target("avx2"))), (void)0)
BK_SGD_KERNEL(sgd_sse, , (void)0)
BK_SGD_KERNEL(sgd_clear_avx2, __attribute__((target("avx2"))), g[i] = 0.0f)
BK_SGD_KERNEL(sgd_clear_sse, , g[i] = 0.0f)

int bk_sgd_step(float *p, float *g, float *buf, size_t n, float lr, float momentum, float weight_decay,
                int clear) {
	int avx2 = __builtin_cpu_supports("avx2");
	if (clear)
		return (avx2 ? sgd_clear_avx2 : sgd_clear_sse)(p, g, buf, n, lr, momentum, weight_decay);
	return (avx2 ? sgd_avx2 : sgd_sse)(p, g, buf, n, lr, momentum, weight_decay);
}
