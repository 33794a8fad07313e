package handoff

// The price of one cgo call, which the backends' direct paths (a small
// collective made on the calling thread) pay per call and a C reference
// loop does not: BenchmarkCgoCall measures it here, with the argument list
// of oneCCL's direct call (twelve words) and cgo's nocallback, as the
// backends declare it. docs/performance.md compares it with the Go-vs-C++
// gap of small oneCCL calls.

/*
#cgo nocallback bk_nop12
#include <stdint.h>
static int bk_nop12(int a, int b, int c, int d, uintptr_t h, char *s, char *r, int64_t n,
                    const int32_t *abort, int64_t t, char *m, size_t len) {
	return a + b + c + d + (int)h + (s == r) + (int)n + (abort == 0) + (int)t + (m == 0) + (int)len;
}
*/
import "C"

// nop12 makes one cgo call that does nothing worth timing.
func nop12(i int) int {
	return int(C.bk_nop12(C.int(i), 0, 0, 0, 0, nil, nil, 0, nil, 0, nil, 0))
}
