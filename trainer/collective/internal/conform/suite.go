package conform

// The conformance suite: one table every backend must pass, run by every
// rank of a real world (World, under mpirun, srun or batchkit run) and by
// in-process worlds (Run). Each case returns an error instead of calling
// t.Fatal so that all ranks keep issuing the same collectives in the same
// order: a rank that stopped early would hang the others.
//
// A backend's tests call it with one line: Run for a backend whose ranks
// can share a process, World for this rank of a world a launcher started.

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/batchkit/batchkit/trainer/collective"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/internal/commhook"
)

// World runs the suite as this rank of a real world, on c natively and then
// through the Allreduce-based fallbacks (c's setting is restored after).
func World(t *testing.T, c *collective.Comm) {
	t.Helper()
	was := commhook.Fallback(c)
	defer commhook.SetFallback(c, was)
	for _, fallback := range []bool{false, true} {
		commhook.SetFallback(c, fallback)
		for _, err := range Check(c) {
			t.Error(err)
		}
		if t.Failed() {
			return
		}
	}
}

// Run runs the suite on in-process worlds (goroutines as ranks), one of
// each size open makes (rank r is backend r of what it returns; it closes
// them, with t.Cleanup say), natively and through the fallbacks, each a
// subtest.
func Run(t *testing.T, sizes []int, open func(t *testing.T, size int) []backend.Backend) {
	t.Helper()
	for _, n := range sizes {
		for _, fallback := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d ranks fallback %v", n, fallback), func(t *testing.T) {
				bs := open(t, n)
				if len(bs) != n {
					t.Fatalf("open made %d backends, want %d", len(bs), n)
				}
				errs := make([][]error, n)
				var wg sync.WaitGroup
				for r, b := range bs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[r] = Check(commhook.NewComm(b, r, fallback).(*collective.Comm))
					}()
				}
				wg.Wait()
				for _, es := range errs {
					for _, err := range es {
						t.Error(err)
					}
				}
			})
		}
	}
}

// Case is one check of the suite, made by every rank of a world alike.
type Case struct {
	Name string
	Run  func(c *collective.Comm) error
}

// Sizes cover one element, odd lengths that do not divide among ranks, and
// lengths above the TCP backend's small-message threshold.
var (
	confLens   = []int{1, 3, 7, 1000, 1<<17 + 3}
	confBlocks = []int{1, 5, 1<<15 + 1}
	confOps    = []collective.Op{collective.Sum, collective.Avg, collective.Max, collective.Min}
)

// Cases is the suite, in the order every rank runs it.
func Cases() []Case {
	var cases []Case
	cases = append(cases, Case{"rank and size", checkIdentity})
	for _, n := range confLens {
		for _, op := range confOps {
			for _, inPlace := range []bool{false, true} {
				mode := "out of place"
				if inPlace {
					mode = "in place"
				}
				cases = append(cases,
					Case{fmt.Sprintf("allreduce float32 %v %s len %d", op, mode, n), func(c *collective.Comm) error { return checkAllreduce[float32](c, n, op, inPlace) }},
					Case{fmt.Sprintf("allreduce float64 %v %s len %d", op, mode, n), func(c *collective.Comm) error { return checkAllreduce[float64](c, n, op, inPlace) }},
				)
			}
		}
		cases = append(cases,
			Case{fmt.Sprintf("broadcast float32 len %d every root", n), func(c *collective.Comm) error { return checkBroadcast[float32](c, n) }},
			Case{fmt.Sprintf("broadcast float64 len %d every root", n), func(c *collective.Comm) error { return checkBroadcast[float64](c, n) }},
		)
	}
	for _, k := range confBlocks {
		cases = append(cases,
			Case{fmt.Sprintf("allgather float32 block %d", k), func(c *collective.Comm) error { return checkAllgather[float32](c, k) }},
			Case{fmt.Sprintf("allgather float64 block %d", k), func(c *collective.Comm) error { return checkAllgather[float64](c, k) }},
		)
		for _, op := range confOps {
			cases = append(cases,
				Case{fmt.Sprintf("reducescatter float32 %v block %d", op, k), func(c *collective.Comm) error { return checkReduceScatter[float32](c, k, op) }},
				Case{fmt.Sprintf("reducescatter float64 %v block %d", op, k), func(c *collective.Comm) error { return checkReduceScatter[float64](c, k, op) }},
			)
		}
	}
	for _, op := range []collective.Op{collective.Max, collective.Min} {
		for _, n := range []int{len(specials), 1<<17 + 3} {
			cases = append(cases,
				Case{fmt.Sprintf("allreduce float32 %v NaN, Inf, ±0 len %d", op, n), func(c *collective.Comm) error { return checkSpecials[float32](c, n, op, false) }},
				Case{fmt.Sprintf("allreduce float64 %v NaN, Inf, ±0 len %d", op, n), func(c *collective.Comm) error { return checkSpecials[float64](c, n, op, false) }},
				Case{fmt.Sprintf("reducescatter float32 %v NaN, Inf, ±0 block %d", op, n), func(c *collective.Comm) error { return checkSpecials[float32](c, n, op, true) }},
				Case{fmt.Sprintf("reducescatter float64 %v NaN, Inf, ±0 block %d", op, n), func(c *collective.Comm) error { return checkSpecials[float64](c, n, op, true) }},
			)
		}
	}
	for _, n := range []int{1, 13, 1<<17 + 3} {
		cases = append(cases,
			Case{fmt.Sprintf("allreduce float32 sum NaN len %d", n), func(c *collective.Comm) error { return checkSumNaN[float32](c, n) }},
			Case{fmt.Sprintf("allreduce float64 sum NaN len %d", n), func(c *collective.Comm) error { return checkSumNaN[float64](c, n) }},
		)
	}
	for _, n := range []int{7, 1<<17 + 3} {
		for _, op := range confOps {
			for _, inPlace := range []bool{false, true} {
				cases = append(cases,
					Case{fmt.Sprintf("allreduce idle float32 %v in place %v len %d: Allreduce's bits", op, inPlace, n), func(c *collective.Comm) error { return checkAllreduceIdle[float32](c, n, op, inPlace) }},
					Case{fmt.Sprintf("allreduce idle float64 %v in place %v len %d: Allreduce's bits", op, inPlace, n), func(c *collective.Comm) error { return checkAllreduceIdle[float64](c, n, op, inPlace) }},
				)
			}
		}
	}
	cases = append(cases,
		Case{"barrier waits for the last rank", checkBarrier},
		Case{"bad arguments rejected locally", checkBadArguments},
		Case{"many small allreduces in a row", checkSequence},
	)
	return cases
}

// Check runs every case on c, this rank's part of the world, and returns
// the failures, each named.
func Check(c *collective.Comm) []error {
	var errs []error
	for _, tc := range Cases() {
		if err := tc.Run(c); err != nil {
			errs = append(errs, fmt.Errorf("rank %d, %s (%s backend, fallback %v): %w", c.Rank(), tc.Name, c.Backend(), commhook.Fallback(c), err))
			var oe *collective.OpError
			if errors.As(err, &oe) {
				// A transport failure breaks the world: later cases would only
				// repeat it (or hang waiting for ranks that gave up).
				return errs
			}
		}
	}
	return errs
}

// identical checks that every rank holds bit-identical s.
func identical[T collective.Float](c *collective.Comm, s []T) error {
	all := make([]float64, 4*c.Size())
	if err := collective.Allgather(c, HashParts(s), all); err != nil {
		return err
	}
	return SameEverywhere(all)
}

func checkIdentity(c *collective.Comm) error {
	if c.Size() < 1 || c.Rank() < 0 || c.Rank() >= c.Size() || c.LocalRank() < 0 || c.LocalRank() >= c.Size() {
		return fmt.Errorf("rank %d, local rank %d, size %d: out of range", c.Rank(), c.LocalRank(), c.Size())
	}
	// Every rank must appear exactly once.
	ranks := make([]float64, c.Size())
	if err := collective.Allgather(c, []float64{float64(c.Rank())}, ranks); err != nil {
		return err
	}
	for i, r := range ranks {
		if int(r) != i {
			return fmt.Errorf("gathered ranks %v: want 0..%d in order", ranks, c.Size()-1)
		}
	}
	return nil
}

func checkAllreduce[T collective.Float](c *collective.Comm, n int, op collective.Op, inPlace bool) error {
	send := make([]T, n)
	FillInput(send, c.Rank())
	recv := send
	if !inPlace {
		recv = make([]T, n)
		for i := range recv {
			recv[i] = 12345 // must be overwritten
		}
	}
	if err := collective.Allreduce(c, send, recv, op); err != nil {
		return err
	}
	if !inPlace {
		if err := Compare("send buffer changed", send, func(i int) T { return T(Input(c.Rank(), i)) }); err != nil {
			return err
		}
	}
	if err := Compare("result", recv, func(i int) T { return Want[T](op, c.Size(), i) }); err != nil {
		return err
	}
	return identical(c, recv)
}

// checkAllreduceIdle: AllreduceIdle gives what Allreduce gives, bit for
// bit (the trainer's buckets rely on it), and what the suite wants.
func checkAllreduceIdle[T collective.Float](c *collective.Comm, n int, op collective.Op, inPlace bool) error {
	want := make([]T, n)
	FillInput(want, c.Rank())
	if err := collective.Allreduce(c, want, want, op); err != nil {
		return err
	}
	send := make([]T, n)
	FillInput(send, c.Rank())
	recv := send
	if !inPlace {
		recv = make([]T, n)
	}
	if err := collective.AllreduceIdle(c, send, recv, op); err != nil {
		return err
	}
	if err := Compare("result", recv, func(i int) T { return Want[T](op, c.Size(), i) }); err != nil {
		return err
	}
	for i := range recv {
		if !sameBits(recv[i], want[i]) {
			return fmt.Errorf("element %d: AllreduceIdle gave %v, Allreduce %v", i, recv[i], want[i])
		}
	}
	return identical(c, recv)
}

func sameBits[T collective.Float](a, b T) bool {
	return math.Float64bits(float64(a)) == math.Float64bits(float64(b))
}

func checkBroadcast[T collective.Float](c *collective.Comm, n int) error {
	for root := 0; root < c.Size(); root++ {
		buf := make([]T, n)
		if c.Rank() == root {
			FillInput(buf, root)
			if n > 2 {
				buf[1] = T(math.Copysign(0, -1)) // -0 must survive, bit for bit
				buf[2] = T(math.Inf(1))
			}
		} else {
			FillInput(buf, c.Rank()+100) // garbage that must be replaced
		}
		if err := collective.Broadcast(c, buf, root); err != nil {
			return err
		}
		err := Compare(fmt.Sprintf("root %d", root), buf, func(i int) T {
			switch {
			case n > 2 && i == 1:
				return T(math.Copysign(0, -1))
			case n > 2 && i == 2:
				return T(math.Inf(1))
			}
			return T(Input(root, i))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func checkAllgather[T collective.Float](c *collective.Comm, k int) error {
	send := make([]T, k)
	FillInput(send, c.Rank())
	recv := make([]T, k*c.Size())
	if err := collective.Allgather(c, send, recv); err != nil {
		return err
	}
	if err := Compare("result", recv, func(i int) T { return T(Input(i/k, i%k)) }); err != nil {
		return err
	}
	return identical(c, recv)
}

func checkReduceScatter[T collective.Float](c *collective.Comm, k int, op collective.Op) error {
	send := make([]T, k*c.Size())
	FillInput(send, c.Rank())
	recv := make([]T, k)
	if err := collective.ReduceScatter(c, send, recv, op); err != nil {
		return err
	}
	if err := Compare("send buffer changed", send, func(i int) T { return T(Input(c.Rank(), i)) }); err != nil {
		return err
	}
	off := c.Rank() * k
	return Compare("result", recv, func(i int) T { return Want[T](op, c.Size(), off+i) })
}

// specials are rank r's value (of n ranks) in columns where Max and Min have
// to rank NaN, infinities and signed zeros that sit on different ranks.
var (
	nanA     = math.Float64frombits(0x7ff8_0000_0000_0abc) // payloads other than math.NaN()'s
	nanB     = math.Float64frombits(0xfff8_0000_0000_0123)
	negZero  = math.Copysign(0, -1)
	posInf   = math.Inf(1)
	negInf   = math.Inf(-1)
	first    = func(r int) bool { return r == 0 }
	specials = []func(r, n int) float64{
		func(r, n int) float64 { return pick(first(r), nanA, 1) },
		func(r, n int) float64 { return pick(r == n-1, nanA, 1) },
		func(r, n int) float64 { return pick(first(r), nanA, pick(r == n-1, nanB, 2)) },
		func(r, n int) float64 { return pick(first(r), posInf, nanB) },
		func(r, n int) float64 { return pick(r == n-1, posInf, nanB) },
		func(r, n int) float64 { return pick(first(r), negInf, nanA) },
		func(r, n int) float64 { return pick(r == n-1, negInf, nanA) },
		func(r, n int) float64 { return pick(first(r), negZero, 0) },
		func(r, n int) float64 { return pick(first(r), 0, negZero) },
		func(r, n int) float64 { return pick(r%2 == 0, negZero, 0) },
		func(r, n int) float64 { return negZero },
		func(r, n int) float64 { return pick(r == n-1, nanB, negInf) },
		func(r, n int) float64 { return pick(first(r), posInf, negInf) },
	}
)

func pick(cond bool, a, b float64) float64 {
	if cond {
		return a
	}
	return b
}

// checkSpecials: Max and Min are math.Max and math.Min on every backend
// (+Inf beats NaN for max, NaN beats the rest, +0 beats -0; mirrored for
// min), a NaN result has math.NaN()'s bits, and every rank has the same bits
// whichever rank held which value. Column i of a row is specials[i%len].
func checkSpecials[T collective.Float](c *collective.Comm, n int, op collective.Op, reduceScatter bool) error {
	r, size := c.Rank(), c.Size()
	value := func(rank, i int) T { return T(specials[i%len(specials)](rank, size)) }
	wantAt := func(i int) T {
		acc := float64(value(0, i))
		for q := 1; q < size; q++ {
			v := float64(value(q, i))
			if op == collective.Max {
				acc = math.Max(acc, v)
			} else {
				acc = math.Min(acc, v)
			}
		}
		return T(acc)
	}
	if !reduceScatter {
		send, recv := make([]T, n), make([]T, n)
		for i := range send {
			send[i] = value(r, i)
		}
		if err := collective.Allreduce(c, send, recv, op); err != nil {
			return err
		}
		if err := Compare("result", recv, wantAt); err != nil {
			return err
		}
		return identical(c, recv)
	}
	send, recv := make([]T, n*size), make([]T, n)
	for i := range send {
		send[i] = value(r, i%n)
	}
	if err := collective.ReduceScatter(c, send, recv, op); err != nil {
		return err
	}
	if err := Compare("result", recv, wantAt); err != nil {
		return err
	}
	// Every block was the same: so is every rank's result.
	return identical(c, recv)
}

// checkSumNaN: NaNs with a different payload on every rank sum to NaN in the
// same places on every rank, the other elements exact. The TCP backend also
// gives every rank the same NaN bits (it fixes the operand order); MPICH's
// MPI_SUM adds in each rank's own order for short messages, and so does
// oneCCL's sum (seen at 1 and 13 elements, 2 ranks), and IEEE addition keeps
// the first NaN operand's payload, so there only the NaNs' places are
// compared (what a data-parallel step checks before applying a gradient).
// A NaN-canonicalising sum would cost the common case.
// sumNaNPayloadsDiffer: the backends whose library sums in each rank's own
// order (see checkSumNaN).
var sumNaNPayloadsDiffer = map[string]bool{string(collective.MPI): true, string(collective.CCL): true}

func checkSumNaN[T collective.Float](c *collective.Comm, n int) error {
	r, size := c.Rank(), c.Size()
	isNaNAt := func(i int) bool { return i%3 == 0 }
	x := make([]T, n)
	for i := range x {
		x[i] = T(Input(r, i))
		if isNaNAt(i) {
			x[i] = T(math.Float64frombits(0x7ff8_0000_0000_0000 | uint64(r+1)<<32))
		}
	}
	if err := collective.Allreduce(c, x, x, collective.Sum); err != nil {
		return err
	}
	canon := make([]T, n)
	for i, v := range x {
		canon[i] = v
		if v != v {
			canon[i] = T(math.NaN())
		}
	}
	err := Compare("result", canon, func(i int) T {
		if isNaNAt(i) {
			return T(math.NaN())
		}
		return Want[T](collective.Sum, size, i)
	})
	if err != nil {
		return err
	}
	if sumNaNPayloadsDiffer[c.Backend()] {
		return identical(c, canon)
	}
	return identical(c, x)
}

// checkBarrier: rank r arrives r×30 ms late; nobody may leave before the
// last rank has arrived. All ranks of the test worlds share one clock (one
// machine), so wall-clock times are comparable.
func checkBarrier(c *collective.Comm) error {
	time.Sleep(time.Duration(c.Rank()) * 30 * time.Millisecond)
	enter := float64(time.Now().UnixMicro())
	if err := c.Barrier(); err != nil {
		return err
	}
	leave := float64(time.Now().UnixMicro())
	times := make([]float64, 2*c.Size())
	if err := collective.Allgather(c, []float64{enter, leave}, times); err != nil {
		return err
	}
	lastEnter, firstLeave := math.Inf(-1), math.Inf(1)
	for r := 0; r < c.Size(); r++ {
		lastEnter = max(lastEnter, times[2*r])
		firstLeave = min(firstLeave, times[2*r+1])
	}
	if firstLeave < lastEnter {
		return fmt.Errorf("a rank left the barrier %.0f µs before the last one entered", lastEnter-firstLeave)
	}
	return nil
}

// checkBadArguments: validation is local and identical on every rank, so
// every rank rejects the call and none communicates.
func checkBadArguments(c *collective.Comm) error {
	buf := make([]float32, 8)
	bad := []struct {
		name string
		err  error
	}{
		{"empty allreduce", collective.Allreduce(c, []float32{}, []float32{}, collective.Sum)},
		{"mismatched allreduce", collective.Allreduce(c, buf[:4], make([]float32, 5), collective.Sum)},
		{"overlapping allreduce", collective.Allreduce(c, buf[:4], buf[2:6], collective.Sum)},
		{"unknown op", collective.Allreduce(c, buf, buf, collective.Op(99))},
		{"root out of range", collective.Broadcast(c, buf, c.Size())},
		{"negative root", collective.Broadcast(c, buf, -1)},
		{"empty broadcast", collective.Broadcast(c, []float64(nil), 0)},
		{"allgather wrong receive length", collective.Allgather(c, buf[:1], make([]float32, c.Size()+1))},
		{"reducescatter wrong send length", collective.ReduceScatter(c, make([]float32, c.Size()+1), buf[:1], collective.Sum)},
	}
	for _, b := range bad {
		var oe *collective.OpError
		if b.err == nil || !errors.As(b.err, &oe) {
			return fmt.Errorf("%s: err = %v, want an *collective.OpError", b.name, b.err)
		}
	}
	return nil
}

// checkSequence: many back-to-back small collectives (latency path) stay in
// step and exact.
func checkSequence(c *collective.Comm) error {
	x := []float64{0}
	for i := 1; i <= 200; i++ {
		x[0] = float64(c.Rank() + i)
		if err := collective.Allreduce(c, x, x, collective.Sum); err != nil {
			return err
		}
		n := c.Size()
		if w := float64(n*i + n*(n-1)/2); x[0] != w {
			return fmt.Errorf("iteration %d: got %v, want %v", i, x[0], w)
		}
	}
	return nil
}
