/* The SGD update of optim.go's sgdGo, in C for cgo builds (optim_cgo.go). */
#ifndef BK_OPTIM_H
#define BK_OPTIM_H
#include <stddef.h>

/* How bk_sgd_step reads the gradient and what it leaves there. */
enum {
	BK_SGD_PLAIN = 0,     /* g as it is, left as it is */
	BK_SGD_MUL_CLEAR = 1, /* g * f (f the exact reciprocal of a power of two), g left +0 */
	BK_SGD_DIV_CLEAR = 2, /* g / f, g left +0 */
};

/* For i < n, with gi the gradient as mode reads it: d = gi + weight_decay*p;
 * buf = momentum*buf + d; p -= lr*buf, each operation rounded to float on
 * its own, as Go does (no fused multiply-add: the file is compiled with
 * fp-contract off). Returns 0 when every new p is finite, 1 when one is
 * not (the loop's divergence check, made in this pass), -1 for an unknown
 * mode. */
int bk_sgd_step(float *p, float *g, float *buf, size_t n, float lr, float momentum, float weight_decay, int mode,
                float f);

#endif
