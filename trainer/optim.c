//go:build openblas || mkl

/* Vectorised by the compiler (AVX2 where the CPU has it, SSE otherwise);
 * fp-contract=off keeps every multiply and add rounded on its own, so the
 * result is bit for bit Go's sgdGo (TestSGDKernelBitIdentical). */
#pragma GCC optimize("O3", "fp-contract=off")
#include "optim.h"

/* bad ORs "p is not finite" (p-p != p-p only for NaN, and ±Inf-±Inf is
 * NaN), an integer reduction the vectoriser keeps in a register. */
#define BK_SGD_LOOP                                   \
	int bad = 0;                                      \
	for (size_t i = 0; i < n; i++) {                  \
		float d = g[i] + weight_decay * p[i];         \
		buf[i] = momentum * buf[i] + d;               \
		p[i] -= lr * buf[i];                          \
		float z = p[i] - p[i];                        \
		bad |= z != z;                                \
	}                                                 \
	return bad;

__attribute__((target("avx2")))
static int sgd_avx2(float *restrict p, const float *restrict g, float *restrict buf, size_t n,
                     float lr, float momentum, float weight_decay) {
	BK_SGD_LOOP
}

static int sgd_sse(float *restrict p, const float *restrict g, float *restrict buf, size_t n,
                    float lr, float momentum, float weight_decay) {
	BK_SGD_LOOP
}

int bk_sgd_step(float *p, const float *g, float *buf, size_t n, float lr, float momentum, float weight_decay) {
	if (__builtin_cpu_supports("avx2"))
		return sgd_avx2(p, g, buf, n, lr, momentum, weight_decay);
	return sgd_sse(p, g, buf, n, lr, momentum, weight_decay);
}
