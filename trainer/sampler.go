package trainer

import (
	"math/bits"
	"math/rand/v2"
)

// Permutation is epoch's sample order: a Fisher-Yates shuffle of 0..n-1
// driven by PCG(seed, epoch) from math/rand/v2, whose output is specified
// (unlike rand.Perm's algorithm, which may change between Go versions), with
// j = ⌊u·(i+1)/2⁶⁴⌋ for each 64-bit draw u (bias below 2⁻⁴⁰ for n < 2²⁴).
// A pure function of (seed, epoch, n): resuming needs only those three.
func Permutation(seed uint64, epoch, n int) []int {
	rng := rand.NewPCG(seed, uint64(epoch))
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j, _ := bits.Mul64(rng.Uint64(), uint64(i+1))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// Shard is rank's share of perm, as torch's DistributedSampler with
// drop_last=false makes it: perm is padded by wrapping around to a multiple
// of world, then rank takes positions rank, rank+world, rank+2·world, ...
// Every rank gets ⌈len(perm)/world⌉ samples, so every rank runs the same
// number of steps.
func Shard(perm []int, rank, world int) []int {
	per := ShardSize(len(perm), world)
	out := make([]int, per)
	for i := range out {
		out[i] = perm[(rank+i*world)%len(perm)]
	}
	return out
}

// StepsPerEpoch is the number of batches of batch in a rank's shard of n
// samples (the last may be short, and is on every rank); with a batch of
// the whole shard or more (any int), one.
func StepsPerEpoch(n, world, batch int) int {
	per := ShardSize(n, world)
	if per == 0 {
		return 0
	}
	return (per-1)/batch + 1
}

// ShardSize is how many of n samples each of world ranks gets (Shard).
func ShardSize(n, world int) int { return (n + world - 1) / world }
