package tcp

import "github.com/batchkit/batchkit/trainer/collective/backend"
import "fmt"

// Tuning, measured on this project's 2-core test machine (BenchmarkTCPTwoProcess
// for two processes, BenchmarkTCPCrossover and BenchmarkTCPBroadcastCrossover
// for 3-5 ranks). Variables only so that the benchmarks can explore them.
const (
	// inlineMax: the first message of a call on a link is sent together
	// with the call header, and received so, up to this size.
	inlineMax   = 16 << 10
	maxSegments = 64
)

var (
	// rdMax: Allreduce uses recursive doubling up to this size, the ring
	// above. Two ranks: equal at 256 KiB, the ring 1.5x faster at 1 MiB,
	// recursive doubling 2x faster at 64 KiB; 3-5 ranks cross over between
	// 64 KiB and 1 MiB.
	rdMax = 256 << 10
	// treeMax: Broadcast uses a binomial tree up to this size, a pipelined
	// chain above it (the root's link carries the data once, not log2 n
	// times).
	treeMax = 64 << 10
	// segBytes: pipelining granularity of the ring. Each segment costs
	// wake-ups on both sides, which dominate on loopback: 2 MiB beat
	// 256 KiB by 1.3-1.6x at 1 and 16 MiB between two processes.
	segBytes = 2 << 20
	// sockBuf: SO_SNDBUF and SO_RCVBUF of every connection; 0 leaves the
	// kernel's autotuning alone (4 MiB measured no better).
	sockBuf = 0
)

// chainMinSeg: the smallest segment a broadcast chain is cut into.
const chainMinSeg = 64 << 10

// segments is how many pipeline segments a block of n elements is cut into.
func segments(n int, t backend.DType) int {
	return max(1, min(maxSegments, (n*t.Size()+segBytes-1)/segBytes))
}

// part is the i-th of k near-equal parts of [lo, hi).
func part(lo, hi, i, k int) (int, int) {
	n := hi - lo
	return lo + i*n/k, lo + (i+1)*n/k
}

func mod(a, n int) int { return ((a % n) + n) % n }

func checkBuffers(a, b backend.Buffer, factor int) error {
	if a.Type != b.Type || a.Len != factor*b.Len || b.Len == 0 {
		return fmt.Errorf("buffers of %d %v and %d %v do not fit (factor %d)", a.Len, a.Type, b.Len, b.Type, factor)
	}
	return nil
}

// Allreduce picks recursive doubling for small messages (log2 n rounds) and
// the ring for large ones (2(n-1)/n of the data on each link). Both fix
// operand order, so every rank ends with the same bits.
func (b *tcpBackend) Allreduce(send, recv backend.Buffer, op backend.Op) error {
	if err := checkBuffers(send, recv, 1); err != nil {
		return err
	}
	if err := b.begin(kindAllreduce, op, send.Type, send.Len, 0); err != nil {
		return err
	}
	var err error
	switch {
	case b.o.Size == 1:
		if !send.Same(recv) {
			copy(recv.Bytes(), send.Bytes())
		}
	case send.Len*send.Type.Size() <= rdMax || send.Len < b.o.Size:
		err = b.allreduceRD(send, recv, op)
	default:
		err = b.allreduceRing(send, recv, op)
	}
	return b.end(err)
}

// exchange sends out to p and receives p's message of the same size into
// in; out is free again when it returns.
func (b *tcpBackend) exchange(p *tcpPeer, out, in []byte) error {
	t, err := b.send(p, out)
	if err != nil {
		return err
	}
	if err := b.recv(p, in); err != nil {
		return err
	}
	return b.waitSent(p, t)
}

// allreduceRD is recursive doubling, as b.rd plans it for this rank (see
// rdPlan: the pairs that fold first when n is not a power of two). At every
// step both partners compute (lower-rank partial) op (higher-rank partial).
func (b *tcpBackend) allreduceRD(send, recv backend.Buffer, op backend.Op) error {
	pl := &b.rd
	nb := send.Len * send.Type.Size()
	tmp := bufferIn(grow(&b.scratch, nb), send.Len, send.Type)
	cur := send // where our partial is; never written while it is send
	if pl.handsOff {
		p := b.peers[pl.fold]
		t, err := b.send(p, cur.Bytes())
		if err == nil {
			err = b.waitSent(p, t) // in place, the result lands on it
		}
		if err != nil {
			return err
		}
		return b.recv(p, recv.Bytes())
	}
	if pl.fold >= 0 {
		if err := b.recv(b.peers[pl.fold], tmp.Bytes()); err != nil {
			return err
		}
		backend.Reduce(recv, tmp, cur, op)
		cur = recv
	}
	for _, s := range pl.steps {
		if err := b.exchange(b.peers[s.peer], cur.Bytes(), tmp.Bytes()); err != nil {
			return err
		}
		if s.mineFirst {
			backend.Reduce(recv, cur, tmp, op)
		} else {
			backend.Reduce(recv, tmp, cur, op)
		}
		cur = recv
	}
	if pl.fold >= 0 {
		_, err := b.send(b.peers[pl.fold], recv.Bytes())
		return err
	}
	return nil
}

// allreduceRing is reduce-scatter then allgather around the ring, each
// chunk cut into segments that are received, reduced and forwarded one by
// one so that the steps overlap. Chunk c is reduced along ranks c, c+1, …
// and its final value is then copied to everyone: all ranks hold the same
// bits.
func (b *tcpBackend) allreduceRing(send, recv backend.Buffer, op backend.Op) error {
	n, r, L := b.o.Size, b.o.Rank, send.Len
	next, prev := b.peers[mod(r+1, n)], b.peers[mod(r-1, n)]
	chunk := func(c int) (int, int) { c = mod(c, n); return c * L / n, (c + 1) * L / n }
	k := segments((L+n-1)/n, send.Type)
	// sent[s]: ticket of reduce-scatter step s's last segment.
	sent := b.tickets[:0]
	defer func() { b.tickets = sent[:0] }()

	// Reduce-scatter. Step s sends chunk r-s and receives chunk r-s-1; the
	// reduced segments go straight out as step s+1's (after the last step,
	// as the allgather's first message).
	var t uint64
	var err error
	lo, hi := chunk(r)
	for i := range k {
		a, z := part(lo, hi, i, k)
		if t, err = b.send(next, send.Slice(a, z).Bytes()); err != nil {
			return err
		}
	}
	sent = append(sent, t)
	for s := range n - 1 {
		lo, hi := chunk(r - s - 1)
		for i := range k {
			a, z := part(lo, hi, i, k)
			dst := recv.Slice(a, z)
			if err := b.recvReduce(prev, dst, send.Slice(a, z), op); err != nil {
				return err
			}
			if t, err = b.send(next, dst.Bytes()); err != nil {
				return err
			}
		}
		sent = append(sent, t)
	}
	// Allgather. Step s receives the final chunk r-s, which reduce-scatter
	// step s sent from the same memory (in place): that send must be done.
	for s := range n - 1 {
		if err := b.waitSent(next, sent[s]); err != nil {
			return err
		}
		lo, hi := chunk(r - s)
		for i := range k {
			a, z := part(lo, hi, i, k)
			dst := recv.Slice(a, z).Bytes()
			if err := b.recv(prev, dst); err != nil {
				return err
			}
			if s < n-2 {
				if _, err := b.send(next, dst); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Broadcast: binomial tree for small buffers (log2 n rounds), a pipelined
// chain root → root+1 → … for large ones (each link carries the buffer once).
func (b *tcpBackend) Broadcast(buf backend.Buffer, root int) error {
	if buf.Len == 0 || root < 0 || root >= b.o.Size {
		return fmt.Errorf("broadcast of %d elements from root %d in a world of %d", buf.Len, root, b.o.Size)
	}
	if err := b.begin(kindBroadcast, 0, buf.Type, buf.Len, root); err != nil {
		return err
	}
	var err error
	switch {
	case b.o.Size == 1:
	case buf.Len*buf.Type.Size() <= treeMax:
		err = b.broadcastTree(buf, root)
	default:
		err = b.broadcastChain(buf, root)
	}
	return b.end(err)
}

func (b *tcpBackend) broadcastTree(buf backend.Buffer, root int) error {
	n := b.o.Size
	vr := mod(b.o.Rank-root, n)
	real := func(v int) *tcpPeer { return b.peers[mod(v+root, n)] }
	mask := 1
	for mask < n {
		if vr&mask != 0 {
			if err := b.recv(real(vr-mask), buf.Bytes()); err != nil {
				return err
			}
			break
		}
		mask <<= 1
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			if _, err := b.send(real(vr+mask), buf.Bytes()); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *tcpBackend) broadcastChain(buf backend.Buffer, root int) error {
	n := b.o.Size
	vr := mod(b.o.Rank-root, n)
	next, prev := b.peers[mod(b.o.Rank+1, n)], b.peers[mod(b.o.Rank-1, n)]
	// The last rank starts receiving after n-2 segments: keep those to
	// about half the transfer, whatever segBytes says.
	nb := buf.Len * buf.Type.Size()
	k := max(segments(buf.Len, buf.Type), min(maxSegments, 2*(n-2), nb/chainMinSeg))
	for i := range k {
		a, z := part(0, buf.Len, i, k)
		seg := buf.Slice(a, z).Bytes()
		if vr > 0 {
			if err := b.recv(prev, seg); err != nil {
				return err
			}
		}
		if vr < n-1 {
			if _, err := b.send(next, seg); err != nil {
				return err
			}
		}
	}
	return nil
}

// Allgather is the ring: step s forwards block r-s and receives block
// r-s-1, segment by segment.
func (b *tcpBackend) Allgather(send, recv backend.Buffer) error {
	n, r := b.o.Size, b.o.Rank
	if err := checkBuffers(recv, send, n); err != nil {
		return err
	}
	if err := b.begin(kindAllgather, 0, send.Type, send.Len, 0); err != nil {
		return err
	}
	m := send.Len
	copy(recv.Slice(r*m, (r+1)*m).Bytes(), send.Bytes())
	if n == 1 {
		return b.end(nil)
	}
	return b.end(b.allgatherRing(send, recv))
}

func (b *tcpBackend) allgatherRing(send, recv backend.Buffer) error {
	n, r, m := b.o.Size, b.o.Rank, send.Len
	next, prev := b.peers[mod(r+1, n)], b.peers[mod(r-1, n)]
	k := segments(m, send.Type)
	for i := range k {
		a, z := part(0, m, i, k)
		if _, err := b.send(next, send.Slice(a, z).Bytes()); err != nil {
			return err
		}
	}
	for s := range n - 1 {
		c := mod(r-s-1, n)
		for i := range k {
			a, z := part(c*m, (c+1)*m, i, k)
			seg := recv.Slice(a, z).Bytes()
			if err := b.recv(prev, seg); err != nil {
				return err
			}
			if s < n-2 {
				if _, err := b.send(next, seg); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ReduceScatter is the ring's first half: step s sends the partial of block
// r-s-1 and receives block r-s-2's, so the last step lands block r. Partials
// go to scratch, never to send.
func (b *tcpBackend) ReduceScatter(send, recv backend.Buffer, op backend.Op) error {
	n := b.o.Size
	if err := checkBuffers(send, recv, n); err != nil {
		return err
	}
	if err := b.begin(kindReduceScatter, op, send.Type, recv.Len, 0); err != nil {
		return err
	}
	if n == 1 {
		copy(recv.Bytes(), send.Bytes())
		return b.end(nil)
	}
	return b.end(b.reduceScatterRing(send, recv, op))
}

func (b *tcpBackend) reduceScatterRing(send, recv backend.Buffer, op backend.Op) error {
	n, r, m, es := b.o.Size, b.o.Rank, recv.Len, send.Type.Size()
	next, prev := b.peers[mod(r+1, n)], b.peers[mod(r-1, n)]
	k := segments(m, send.Type)
	work := bufferIn(grow(&b.work, send.Len*es), send.Len, send.Type)
	c0 := mod(r-1, n)
	for i := range k {
		a, z := part(c0*m, (c0+1)*m, i, k)
		if _, err := b.send(next, send.Slice(a, z).Bytes()); err != nil {
			return err
		}
	}
	for s := range n - 1 {
		c := mod(r-s-2, n)
		for i := range k {
			a, z := part(c*m, (c+1)*m, i, k)
			dst := work.Slice(a, z)
			if s == n-2 {
				dst = recv.Slice(a-c*m, z-c*m)
			}
			if err := b.recvReduce(prev, dst, send.Slice(a, z), op); err != nil {
				return err
			}
			if s == n-2 {
				continue
			}
			if _, err := b.send(next, dst.Bytes()); err != nil {
				return err
			}
		}
	}
	return nil
}

// Barrier is a dissemination barrier: in round j every rank signals rank
// r+2^j and waits for rank r-2^j; after ceil(log2 n) rounds each rank has
// heard, transitively, from all. The messages are bare call headers.
func (b *tcpBackend) Barrier() error {
	if err := b.begin(kindBarrier, 0, 0, 0, 0); err != nil {
		return err
	}
	n, r := b.o.Size, b.o.Rank
	var err error
	for d := 1; d < n && err == nil; d <<= 1 {
		if _, err = b.send(b.peers[mod(r+d, n)], nil); err == nil {
			err = b.recv(b.peers[mod(r-d, n)], nil)
		}
	}
	return b.end(err)
}
