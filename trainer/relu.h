/* The step's ReLU passes of model.go (reluForwardGo, reluBackwardGo), in C
 * for cgo builds (relu_cgo.go). */
#ifndef BK_RELU_H
#define BK_RELU_H
#include <stddef.h>

/* z[i] = max(z[i], 0) as Go's max: NaN stays NaN, -0 becomes +0. */
void bk_relu_forward(float *z, size_t len);

/* For n rows of out: da = 0 where a <= 0 (a NaN keeps da), and gb (out
 * long) = the sum of da's masked rows, added in row order. */
void bk_relu_backward(float *da, const float *a, float *gb, size_t n, size_t out);

#endif
