//go:build openblas || mkl

/* Vectorised by the compiler (AVX2 where the CPU has it, SSE otherwise);
 * fp-contract=off keeps every multiply and add rounded on its own, so the
 * result is bit for bit Go's sgdGo (TestSGDKernelBitIdentical). */
#pragma GCC optimize("O3", "fp-contract=off")
#include "optim.h"

#define BK_SGD_LOOP                                   \
	for (size_t i = 0; i < n; i++) {                  \
		float d = g[i] + weight_decay * p[i];         \
		buf[i] = momentum * buf[i] + d;               \
		p[i] -= lr * buf[i];                          \
	}

__attribute__((target("avx2")))
static void sgd_avx2(float *restrict p, const float *restrict g, float *restrict buf, size_t n,
                     float lr, float momentum, float weight_decay) {
	BK_SGD_LOOP
}

static void sgd_sse(float *restrict p, const float *restrict g, float *restrict buf, size_t n,
                    float lr, float momentum, float weight_decay) {
	BK_SGD_LOOP
}

void bk_sgd_step(float *p, const float *g, float *buf, size_t n, float lr, float momentum, float weight_decay) {
	if (__builtin_cpu_supports("avx2"))
		sgd_avx2(p, g, buf, n, lr, momentum, weight_decay);
	else
		sgd_sse(p, g, buf, n, lr, momentum, weight_decay);
}
