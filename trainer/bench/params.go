package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/internal/bytesize"
	"github.com/batchkit/batchkit/internal/closed"
	"github.com/batchkit/batchkit/trainer/collective"
)

// Collective is the collective operation being measured (what --op names;
// not collective.Op, the reduction it applies). It is a closed set.
type Collective string

const (
	Allreduce     Collective = "allreduce"     // out of place, Sum
	Broadcast     Collective = "broadcast"     // in place, root 0
	Allgather     Collective = "allgather"     // bytes = the gathered buffer
	ReduceScatter Collective = "reducescatter" // bytes = the input buffer, Sum
)

// Collectives lists them in the order the help text gives them.
var Collectives = []Collective{Allreduce, Broadcast, Allgather, ReduceScatter}

// ParseCollective reads "allreduce", "broadcast", "allgather" or "reducescatter".
func ParseCollective(s string) (Collective, error) { return closed.Parse("op", s, Collectives) }

// DTypes lists the element types a run can use.
var DTypes = []string{"float32", "float64"}

// ParseDType reads "float32" or "float64".
func ParseDType(s string) (collective.DType, error) {
	switch s {
	case "float32":
		return collective.Float32, nil
	case "float64":
		return collective.Float64, nil
	}
	return 0, fmt.Errorf("unknown dtype %q: want one of %s", s, strings.Join(DTypes, ", "))
}

// Schedule is the iteration schedule of a size, shared by batchkit and both
// references (reference/mpi_bench.c, reference/gloo_bench.py): warm-up and
// timed iterations.
//
//	bytes <= 64 KiB   100 warm-up, 1000 timed
//	bytes <=  1 MiB    20,  200
//	bytes <= 16 MiB     5,   50
//	larger              2,   20
func Schedule(bytes int64) (warmup, iters int) {
	switch {
	case bytes <= 64<<10:
		return 100, 1000
	case bytes <= 1<<20:
		return 20, 200
	case bytes <= 16<<20:
		return 5, 50
	}
	return 2, 20
}

// ScheduleIters is Schedule with --iters: when n > 0 it replaces the timed
// iterations and the warm-up becomes max(1, n/10).
func ScheduleIters(bytes int64, n int) (warmup, iters int) {
	if n <= 0 {
		return Schedule(bytes)
	}
	return max(1, n/10), n
}

// BusFactor is nccl-tests' ratio of bus bandwidth to algorithm bandwidth for
// op on n ranks: 2(n−1)/n for allreduce, (n−1)/n for allgather and
// reducescatter, 1 for broadcast. For n == 1 it is 1 (busbw = algbw), not
// nccl-tests' 0: see the package documentation.
func BusFactor(op Collective, n int) float64 {
	if n <= 1 {
		return 1
	}
	f := float64(n-1) / float64(n)
	switch op {
	case Allreduce:
		return 2 * f
	case Allgather, ReduceScatter:
		return f
	}
	return 1
}

// Bandwidths returns algbw and busbw in GB/s (1e9 B/s) for bytes moved in
// seconds per operation.
func Bandwidths(op Collective, ranks int, bytes int64, seconds float64) (algbw, busbw float64) {
	if seconds <= 0 {
		return 0, 0
	}
	algbw = float64(bytes) / seconds / 1e9
	return algbw, algbw * BusFactor(op, ranks)
}

// Unit is the granule of a size for op: the element size, times the number
// of ranks for allgather and reducescatter (one equal block per rank).
func Unit(op Collective, dt collective.DType, ranks int) int64 {
	u := int64(dt.Size())
	if op == Allgather || op == ReduceScatter {
		u *= int64(max(ranks, 1))
	}
	return u
}

// Sizes is the sweep min, 2·min, 4·min, ... up to max, each rounded up to
// a multiple of Unit (so that 3..5 bytes of float32 runs 4, and 6.. starts
// at 8: never below min); sizes past max, and repeats, are skipped.
func Sizes(op Collective, dt collective.DType, ranks int, min, max int64) []int64 {
	unit := Unit(op, dt, ranks)
	var out []int64
	for b := min; b > 0 && b <= max; b *= 2 {
		s := (b + unit - 1) / unit * unit // up: no size below min
		if s <= max && (len(out) == 0 || out[len(out)-1] != s) {
			out = append(out, s)
		}
		if b > math.MaxInt64/2 {
			break
		}
	}
	return out
}

// BufferBytes is what a run of the sweep allocates on each rank for its
// buffers: the largest size's send and receive slices (Run allocates them
// once), 0 for an empty sweep. The backend's own buffers come on top.
func BufferBytes(op Collective, dt collective.DType, ranks int, min, max int64) int64 {
	sizes := Sizes(op, dt, ranks, min, max)
	if len(sizes) == 0 {
		return 0
	}
	b := sizes[len(sizes)-1]
	switch op {
	case Broadcast:
		return b
	case Allgather, ReduceScatter:
		return b + b/int64(ranks)
	}
	return 2 * b
}

// MaxSize bounds --max-bytes: buffers of this size are allocated (twice for
// out-of-place operations) on every rank.
const MaxSize = 16 << 30

// ParseSize reads a byte count: a plain number, or one with a suffix K, KiB,
// M, MiB, G or GiB (binary multiples, as in nccl-tests: K = KiB = 1024),
// with an optional B ("8B", "64KB" is 64 KiB), letters in any case.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not a size: want a number of bytes, optionally with K, KiB, M, MiB, G or GiB", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: %v", s, err.(*strconv.NumError).Err)
	}
	var mult int64
	switch strings.ToLower(strings.TrimSpace(t[i:])) {
	case "", "b":
		mult = 1
	case "k", "kb", "kib":
		mult = 1 << 10
	case "m", "mb", "mib":
		mult = 1 << 20
	case "g", "gb", "gib":
		mult = 1 << 30
	default:
		return 0, fmt.Errorf("%q is not a size: unknown unit %q (want K, KiB, M, MiB, G or GiB)", s, strings.TrimSpace(t[i:]))
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size: too large", s)
	}
	return n * mult, nil
}

// FormatSize is a byte count for people: "8 B", "1 KiB", "1.5 KiB", "64 MiB"
// (at most two decimals); internal/bytesize's, which the other packages use.
func FormatSize(b int64) string { return bytesize.Format(b) }
