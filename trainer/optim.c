//go:build openblas || mkl

/* Vectorised by the compiler (AVX2 where the CPU has it, SSE otherwise);
 * fp-contract=off keeps every multiply, divide and add rounded on its own,
 * so the result is bit for bit Go's sgdGo (TestSGDKernelBitIdentical). */
#pragma GCC optimize("O3", "fp-contract=off")
#include "optim.h"

/* G is how the loop reads the gradient: g[i], g[i] * f or g[i] / f (the
 * mean of a sum: optim.go's StepMean); CLEAR what it leaves in
 * g. bad ORs "p is not finite" (p-p != p-p only for NaN, and ±Inf-±Inf is
 * NaN), an integer reduction the vectoriser keeps in a register. */
#define BK_SGD_LOOP(G, CLEAR)                         \
	int bad = 0;                                      \
	for (size_t i = 0; i < n; i++) {                  \
		float gi = G;                                 \
		CLEAR;                                        \
		float d = gi + weight_decay * p[i];           \
		buf[i] = momentum * buf[i] + d;               \
		p[i] -= lr * buf[i];                          \
		float z = p[i] - p[i];                        \
		bad |= z != z;                                \
	}                                                 \
	return bad;

/* One function per loop, so that no branch is left in the vector loop. */
#define BK_SGD_KERNEL(NAME, ATTR, G, CLEAR)                                                 \
	ATTR static int NAME(float *restrict p, float *restrict g, float *restrict buf, size_t n, \
	                     float lr, float momentum, float weight_decay, float f) {             \
		(void)f;                                                                              \
		BK_SGD_LOOP(G, CLEAR)                                                                 \
	}

#define BK_AVX2 __attribute__((target("avx2")))
BK_SGD_KERNEL(sgd_avx2, BK_AVX2, g[i], (void)0)
BK_SGD_KERNEL(sgd_sse, , g[i], (void)0)
BK_SGD_KERNEL(sgd_mul_clear_avx2, BK_AVX2, g[i] * f, g[i] = 0.0f)
BK_SGD_KERNEL(sgd_mul_clear_sse, , g[i] * f, g[i] = 0.0f)
BK_SGD_KERNEL(sgd_div_clear_avx2, BK_AVX2, g[i] / f, g[i] = 0.0f)
BK_SGD_KERNEL(sgd_div_clear_sse, , g[i] / f, g[i] = 0.0f)

typedef int (*bk_sgd_kernel)(float *restrict, float *restrict, float *restrict, size_t, float, float, float, float);

int bk_sgd_step(float *p, float *g, float *buf, size_t n, float lr, float momentum, float weight_decay, int mode,
                float f) {
	static const bk_sgd_kernel avx2[] = {sgd_avx2, sgd_mul_clear_avx2, sgd_div_clear_avx2};
	static const bk_sgd_kernel sse[] = {sgd_sse, sgd_mul_clear_sse, sgd_div_clear_sse};
	if (mode < BK_SGD_PLAIN || mode > BK_SGD_DIV_CLEAR)
		return -1;
	return (__builtin_cpu_supports("avx2") ? avx2 : sse)[mode](p, g, buf, n, lr, momentum, weight_decay, f);
}
