//go:build ccl

package ccl

import (
	"errors"
	"testing"

	"github.com/batchkit/batchkit/trainer/collective/backend"
)

// The shim refuses a collective, type or op it does not know with
// BKCCL_ERR_ARG and says which, before it calls oneCCL (which would take
// an unknown kind as a barrier once start() built the event).
func TestShimRefusesUnknownCodes(t *testing.T) {
	b := WorldOfOne(t).(*cclBackend)
	buf := backend.BufferOf([]float32{1, 2})
	tests := []struct {
		name string
		k    kind
		t    backend.DType
		op   backend.Op
		want string
	}{
		{"collective below the range", 0, backend.Float32, backend.Sum, "bkccl: unknown collective 0"},
		{"collective above the range", kBarrier + 1, backend.Float32, backend.Sum, "bkccl: unknown collective 6"},
		{"type", kAllreduce, 7, backend.Sum, "bkccl: unknown type 7"},
		{"op", kAllreduce, backend.Float32, 9, "bkccl: unknown op 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b.mu.Lock()
			err := b.direct(tt.k, buf.Ptr, buf.Ptr, buf.Len, tt.t, tt.op, 0, 8)
			b.mu.Unlock()
			var e *Error
			if !errors.As(err, &e) || e.Code != codeArg || e.Msg != tt.want {
				t.Fatalf("got %v, want code %d and %q", err, codeArg, tt.want)
			}
		})
	}
	// The backend still works: nothing reached oneCCL.
	out := make([]float32, 2)
	if err := b.Allreduce(buf, backend.BufferOf(out), backend.Sum); err != nil || out[0] != 1 || out[1] != 2 {
		t.Fatalf("allreduce after the refusals: %v, %v", err, out)
	}
}
