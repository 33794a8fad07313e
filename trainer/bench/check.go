package bench

import (
	"fmt"
	"hash/fnv"
	"math"
	"unsafe"

	"github.com/batchkit/batchkit/trainer/collective"
)

// The correctness check. Every value is a small integer, exactly
// representable in float32 (< 2^24) and so is every partial sum in any
// order: results are exact whatever the reduction's algorithm.
//
//	allreduce      send[i] = v(i)·(r+1)        → every rank: v(i)·n(n+1)/2
//	reducescatter  send[i] = v(i)·(r+1)        → rank r, block element j: v(rk+j)·n(n+1)/2
//	allgather      send[j] = u(rk+j)           → every rank: u(i)
//	broadcast      rank 0: u(i), others: −1    → every rank: u(i)
//
// with v(i) = i mod M + 1, M odd and chosen so that v·n(n+1)/2 < 2^24 (for worlds so
// large that n(n+1)/2 > 2^20 the weights become 1 and the sum n·v),
// u(i) = i mod (2^23−1) + 1, and receive buffers pre-filled with −1.

const sentinel = -1

// checkHook, when set (tests only), sees each rank's result ([]float32 or
// []float64) before it is verified, and may corrupt it.
var checkHook func(rank int, bytes int64, result any)

// sumPattern returns M and whether the weights are r+1 (else 1) for n ranks.
func sumPattern(n int) (m int, weighted bool) {
	k := n * (n + 1) / 2
	weighted = k <= 1<<20
	if !weighted {
		k = n
	}
	m = max(1, min(1<<20, (1<<24)/k))
	if m > 1 && m%2 == 0 {
		m-- // odd: blocks of a power-of-two length never line up with the period
	}
	return m, weighted
}

// totalWeight is the sum over n ranks of the weights.
func totalWeight(n int, weighted bool) float64 {
	if weighted {
		return float64(n * (n + 1) / 2)
	}
	return float64(n)
}

func plainValue(i int) float64 { return float64(i%(1<<23-1) + 1) }

// fillInputs fills rank's input of op (send; for broadcast the buffer).
func fillInputs[T collective.Float](op Collective, rank, n int, send []T) {
	switch op {
	case Allreduce, ReduceScatter:
		m, weighted := sumPattern(n)
		w := T(1)
		if weighted {
			w = T(rank + 1)
		}
		for i := range send {
			send[i] = T(i%m+1) * w
		}
	case Allgather:
		off := rank * len(send)
		for j := range send {
			send[j] = T(plainValue(off + j))
		}
	case Broadcast:
		if rank != 0 {
			fill(send, sentinel)
			return
		}
		for i := range send {
			send[i] = T(plainValue(i))
		}
	}
}

func fill[T collective.Float](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}

// firstWrong is the index of the first element of rank's result that is not
// the expected value, with the value and the expected one; -1 if none.
func firstWrong[T collective.Float](op Collective, rank, n int, result []T) (index int, got, expected float64) {
	m, weighted := sumPattern(n)
	total := totalWeight(n, weighted)
	off := 0
	if op == ReduceScatter {
		off = rank * len(result)
	}
	for i, g := range result {
		var w float64
		switch op {
		case Allreduce, ReduceScatter:
			w = float64((off+i)%m+1) * total
		default:
			w = plainValue(i)
		}
		if float64(g) != w {
			return i, float64(g), w
		}
	}
	return -1, 0, 0
}

// CheckError is a wrong result: the same on every rank.
type CheckError struct {
	Op    Collective
	Bytes int64
	Rank  int // the lowest rank with a wrong element
	// Index is the first wrong element of Rank's result (its receive buffer;
	// for broadcast the buffer); -1 when every rank's result was right but
	// the ranks' results were not bit-identical.
	Index     int
	Got, Want float64
}

func (e *CheckError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("%s %s (%d bytes): wrong result: the ranks' results are not bit-identical", e.Op, FormatSize(e.Bytes), e.Bytes)
	}
	return fmt.Sprintf("%s %s (%d bytes): wrong result on rank %d: element %d is %v, want %v",
		e.Op, FormatSize(e.Bytes), e.Bytes, e.Rank, e.Index, e.Got, e.Want)
}

// check runs op once on count elements filled with the check pattern and
// verifies the result on every rank; every rank returns the same error.
func (r *runner[T]) check(bytes int64, count int) error {
	send, recv := r.buffers(count)
	fillInputs(r.op, r.rank, r.n, send)
	result := recv
	if r.op == Broadcast {
		result = send
	} else {
		fill(recv, sentinel)
	}
	if err := r.once(send, recv); err != nil {
		return fmt.Errorf("%s %s: check: %w", r.op, FormatSize(bytes), err)
	}

	if checkHook != nil {
		checkHook(r.rank, bytes, result)
	}
	bad, got, exp := firstWrong(r.op, r.rank, r.n, result)
	// One Max allreduce tells every rank: did any rank fail, which is the
	// lowest that did, and the max and −min of each 16-bit part of the
	// results' hashes (equal max and min: bit-identical results).
	vec := make([]float64, 10)
	vec[1] = math.Inf(-1)
	if bad >= 0 {
		vec[0], vec[1] = 1, -float64(r.rank)
	}
	if r.op != ReduceScatter { // each rank holds a different block
		h := hashOf(result)
		for k := range 4 {
			part := float64(h >> (16 * k) & 0xffff)
			vec[2+k], vec[6+k] = part, -part
		}
	}
	if err := collective.Allreduce(r.c, vec, vec, collective.Max); err != nil {
		return fmt.Errorf("%s %s: check: %w", r.op, FormatSize(bytes), err)
	}
	if vec[0] > 0 {
		who := int(-vec[1])
		info := []float64{float64(bad), got, exp}
		if err := collective.Broadcast(r.c, info, who); err != nil {
			return fmt.Errorf("%s %s: check: %w", r.op, FormatSize(bytes), err)
		}
		return &CheckError{Op: r.op, Bytes: bytes, Rank: who, Index: int(info[0]), Got: info[1], Want: info[2]}
	}
	for k := range 4 {
		if vec[2+k] != -vec[6+k] {
			return &CheckError{Op: r.op, Bytes: bytes, Rank: -1, Index: -1}
		}
	}
	return nil
}

// hashOf is FNV-1a of the slice's bytes.
func hashOf[T collective.Float](s []T) uint64 {
	h := fnv.New64a()
	if len(s) > 0 {
		var zero T
		h.Write(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero))))
	}
	return h.Sum64()
}
