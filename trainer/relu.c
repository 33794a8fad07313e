//go:build openblas || mkl

/* Vectorised by the compiler as optim.c is (AVX2 where the CPU has it);
 * fp-contract=off and the same order of additions keep every result bit for
 * bit Go's (TestReluBackwardBitIdentical, TestReluForwardBitIdentical). */
#pragma GCC optimize("O3", "fp-contract=off")
#include "relu.h"

#define BK_RELU_FORWARD                                      \
	for (size_t i = 0; i < len; i++) {                       \
		float v = z[i];                                      \
		z[i] = v > 0.0f ? v : (v != v ? v : 0.0f);           \
	}

#define BK_RELU_BACKWARD                                     \
	for (size_t j = 0; j < out; j++)                         \
		gb[j] = 0.0f;                                        \
	for (size_t r = 0; r < n; r++) {                         \
		float *restrict d = da + r * out;                    \
		const float *restrict x = a + r * out;               \
		for (size_t j = 0; j < out; j++) {                   \
			float v = x[j] <= 0.0f ? 0.0f : d[j];            \
			d[j] = v;                                        \
			gb[j] += v;                                      \
		}                                                    \
	}

__attribute__((target("avx2")))
static void relu_forward_avx2(float *restrict z, size_t len) { BK_RELU_FORWARD }
static void relu_forward_sse(float *restrict z, size_t len) { BK_RELU_FORWARD }

__attribute__((target("avx2")))
static void relu_backward_avx2(float *restrict da, const float *restrict a, float *restrict gb, size_t n, size_t out) {
	BK_RELU_BACKWARD
}
static void relu_backward_sse(float *restrict da, const float *restrict a, float *restrict gb, size_t n, size_t out) {
	BK_RELU_BACKWARD
}

void bk_relu_forward(float *z, size_t len) {
	if (__builtin_cpu_supports("avx2"))
		relu_forward_avx2(z, len);
	else
		relu_forward_sse(z, len);
}

void bk_relu_backward(float *da, const float *a, float *gb, size_t n, size_t out) {
	if (__builtin_cpu_supports("avx2"))
		relu_backward_avx2(da, a, gb, n, out);
	else
		relu_backward_sse(da, a, gb, n, out);
}
