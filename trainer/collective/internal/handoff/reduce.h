// Max and Min as Go's math.Max and math.Min, for the cgo backends whose
// library does the reducing (mpi's MPI_Op, ccl's custom reduction): the
// rules of backend.Reduce. A library's own max and min leave NaN and -0 vs
// +0 to operand order (x > y ? x : y), which differs between ranks, so
// ranks could end with different bits. Here +Inf beats NaN beats
// everything for max (-Inf for min), +0 beats -0 (-0 for min), and a NaN
// result is always math.NaN()'s bits.
#ifndef BATCHKIT_REDUCE_H
#define BATCHKIT_REDUCE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline double bk_nan64(void) { uint64_t u = 0x7FF8000000000001ULL; double d; memcpy(&d, &u, 8); return d; }
static inline float bk_nan32(void) { uint32_t u = 0x7FC00000U; float f; memcpy(&f, &u, 4); return f; }

// Equal values differ only as -0 and +0: max keeps x unless x is -0
// (signbit set), min keeps x unless x is +0.
static inline double bk_max64(double x, double y) {
	if (x > y) return x;
	if (y > x) return y;
	if (x == INFINITY || y == INFINITY) return INFINITY;
	if (x != x || y != y) return bk_nan64();
	return signbit(x) ? y : x;
}
static inline double bk_min64(double x, double y) {
	if (x < y) return x;
	if (y < x) return y;
	if (x == -INFINITY || y == -INFINITY) return -INFINITY;
	if (x != x || y != y) return bk_nan64();
	return signbit(x) ? x : y;
}
static inline float bk_max32(float x, float y) {
	if (x > y) return x;
	if (y > x) return y;
	if (x == INFINITY || y == INFINITY) return INFINITY;
	if (x != x || y != y) return bk_nan32();
	return signbit(x) ? y : x;
}
static inline float bk_min32(float x, float y) {
	if (x < y) return x;
	if (y < x) return y;
	if (x == -INFINITY || y == -INFINITY) return -INFINITY;
	if (x != x || y != y) return bk_nan32();
	return signbit(x) ? x : y;
}

#endif
