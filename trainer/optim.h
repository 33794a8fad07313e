/* The SGD update of optim.go's sgdGo, in C for cgo builds (optim_cgo.go). */
#ifndef BK_OPTIM_H
#define BK_OPTIM_H
#include <stddef.h>

/* For i < n: d = g + weight_decay*p; buf = momentum*buf + d; p -= lr*buf,
 * each operation rounded to float on its own, as Go does (no fused
 * multiply-add: the file is compiled with fp-contract off). Returns 0 when
 * every new p is finite, else nonzero (the loop's divergence check, made
 * in this pass). With clear nonzero it also sets every g to +0 in the same
 * pass. Cannot fail. */
int bk_sgd_step(float *p, float *g, float *buf, size_t n, float lr, float momentum, float weight_decay,
                int clear);

#endif
