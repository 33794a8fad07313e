package tcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/batchkit/batchkit/trainer/collective/tcp/internal/rendezvous"
)

// Same-host links. Loopback TCP tops out near 2 GB/s here (every byte is
// copied twice by the kernel, in 64 KiB packets, with a wake-up each), which
// is what a ring allreduce can reach between two ranks on one host. So the
// TCP backend moves the data of a link between two ranks on the same host
// through shared memory instead: one single-producer single-consumer byte
// ring per direction in a file under /dev/shm that both processes map. The
// TCP connection stays open beside it: it proves the peer is alive (a dead
// or closed peer's socket reads EOF) and carries nothing else.
//
// Only ring neighbours (ranks r±1) get such a link: the large-message
// algorithms (ring allreduce, reduce-scatter, allgather, broadcast chain)
// only talk to them, and a host with k ranks then maps 2k rings, not k².
// Set BATCHKIT_TCP_SHM=0 to keep every link on TCP.
//
// A ring carries exactly the byte stream the TCP link would (call header,
// then payloads), except that each message starts 8-byte aligned, so that
// the receiver can reduce float64 elements straight out of the ring: every
// send on a link is matched by a recv of the same length on the other side,
// which every algorithm here does by construction.
//
// Waiting: spin for shmSpin, then sleep on a futex in the shared page with
// a timeout of shmPoll, after which the waiter checks that the peer's socket
// is still open, that the backend has not failed and that the collective
// timeout has not passed.

var (
	// shmRingBytes: each direction's capacity. 4 MiB holds two of the
	// ring allreduce's 2 MiB segments, so a sender rarely waits for room.
	shmRingBytes = 4 << 20
	// shmChunk: a waiting reader (writer) sleeps until this much data
	// (room) is there or the message is complete: fewer, larger wake-ups.
	shmChunk = 256 << 10
	// shmSpin: how long a waiter polls before it sleeps.
	shmSpin = 20 * time.Microsecond
	// shmPoll: the longest sleep between two liveness checks.
	shmPoll = 20 * time.Millisecond
)

const (
	shmMagic   = "batchkit shm ring v1\x00\x00\x00\x00" // 24 bytes
	shmPage    = 4096
	shmNonceAt = 32 // the creator's nonce: the peer checks it mapped the right file
	shmNonceSz = 32
	shmCapAt   = 64
	// Ring control block: one cache line per word that one side writes.
	ctlHead       = 0   // writer: bytes written, ever
	ctlDataSeq    = 64  // writer bumps it to wake the reader (futex word)
	ctlReaderNeed = 72  // reader: bytes it sleeps for, 0 when awake
	ctlTail       = 128 // reader: bytes consumed, ever
	ctlSpaceSeq   = 192 // reader bumps it to wake the writer (futex word)
	ctlWriterNeed = 200 // writer: bytes of room it sleeps for, 0 when awake
)

// shmRing is one direction of a link: a view of the shared control page and
// data area, and this side's private position.
type shmRing struct {
	data       []byte
	head, tail *atomic.Uint64
	dataSeq    *atomic.Uint32
	readerNeed *atomic.Uint32
	spaceSeq   *atomic.Uint32
	writerNeed *atomic.Uint32
	pos        uint64 // the head for the writer, the tail for the reader
}

func newShmRing(ctl, data []byte) *shmRing {
	u64 := func(off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&ctl[off])) }
	u32 := func(off int) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&ctl[off])) }
	return &shmRing{data: data, head: u64(ctlHead), tail: u64(ctlTail),
		dataSeq: u32(ctlDataSeq), readerNeed: u32(ctlReaderNeed),
		spaceSeq: u32(ctlSpaceSeq), writerNeed: u32(ctlWriterNeed)}
}

// shmLink is a same-host link: the mapping and its two rings.
type shmLink struct {
	mem     []byte
	out, in *shmRing
}

// shmLayout: link page, then per ring a control page and the data.
func shmSize(ringBytes int) int { return shmPage + 2*(shmPage+ringBytes) }

// newShmLink views mem; the creator (the lower rank) writes ring 0.
func newShmLink(mem []byte, ringBytes int, creator bool) *shmLink {
	ring := func(i int) *shmRing {
		base := shmPage + i*(shmPage+ringBytes)
		return newShmRing(mem[base:base+shmPage], mem[base+shmPage:base+shmPage+ringBytes])
	}
	l := &shmLink{mem: mem, out: ring(0), in: ring(1)}
	if !creator {
		l.out, l.in = l.in, l.out
	}
	return l
}

// wakeAll wakes whoever sleeps on either ring, on either side: after a
// failure, so that they look at the world again.
func (l *shmLink) wakeAll() {
	for _, r := range []*shmRing{l.out, l.in} {
		r.dataSeq.Add(1)
		futexWake(r.dataSeq)
		r.spaceSeq.Add(1)
		futexWake(r.spaceSeq)
	}
}

// Writer side.

func (r *shmRing) room() int { return len(r.data) - int(int64(r.pos-r.tail.Load())) }

// beginMessage starts a message 8-byte aligned. The padding is published
// with the message's first bytes; the reader skips it the same way.
func (r *shmRing) beginMessage() { r.pos = (r.pos + 7) &^ 7 }

// write copies as much of p as fits now, publishes it and wakes a reader
// that sleeps for it. It returns how much it wrote.
func (r *shmRing) write(p []byte) int {
	n := min(len(p), r.room())
	if n <= 0 {
		return 0
	}
	c := len(r.data)
	at := int(r.pos % uint64(c))
	k := copy(r.data[at:], p[:n])
	copy(r.data, p[k:n])
	r.publish(r.pos + uint64(n))
	return n
}

func (r *shmRing) publish(head uint64) {
	r.pos = head
	r.head.Store(head)
	if need := r.readerNeed.Load(); need != 0 && int64(head-r.tail.Load()) >= int64(need) {
		r.dataSeq.Add(1)
		futexWake(r.dataSeq)
	}
}

// Reader side.

// available may be negative: after beginRead skipped padding that the
// writer has not published yet.
func (r *shmRing) available() int { return int(int64(r.head.Load() - r.pos)) }

func (r *shmRing) beginRead() { r.pos = (r.pos + 7) &^ 7 }

// readNeed is how much data a reader with remaining bytes to go waits for.
// At most the ring less 8: the writer counts from the stored tail, up to 7
// bytes of skipped padding behind the reader, and must be able to see it.
func (r *shmRing) readNeed(remaining int) int { return min(remaining, shmChunk, len(r.data)-8) }

// next is the contiguous readable run at the tail, at most n bytes.
func (r *shmRing) next(n int) []byte {
	c := len(r.data)
	at := int(r.pos % uint64(c))
	n = min(n, r.available(), c-at)
	return r.data[at : at+n]
}

func (r *shmRing) consume(n int) {
	r.pos += uint64(n)
	r.tail.Store(r.pos)
	if need := r.writerNeed.Load(); need != 0 && len(r.data)-int(int64(r.head.Load()-r.pos)) >= int(need) {
		r.spaceSeq.Add(1)
		futexWake(r.spaceSeq)
	}
}

// shmWait waits until r has need bytes of room (sending) or of data:
// spinning first, then sleeping on the ring's futex word with need
// announced, checking between sleeps that the link and the backend are
// still good and that the collective timeout has not passed.
func (b *tcpBackend) shmWait(p *tcpPeer, r *shmRing, sending bool, need int) error {
	ready := func() bool {
		if sending {
			return r.room() >= need
		}
		return r.available() >= need
	}
	if ready() {
		return nil
	}
	spinUntil := time.Now().Add(shmSpin)
	for time.Now().Before(spinUntil) {
		if ready() {
			return nil
		}
	}
	seq, announce := r.dataSeq, r.readerNeed
	if sending {
		seq, announce = r.spaceSeq, r.writerNeed
	}
	deadline := time.Now().Add(b.o.Timeout)
	for {
		s := seq.Load()
		if sending {
			announce.Store(uint32(need))
		} else {
			// The writer measures from the tail it sees, which lags our
			// position by the padding skipped at a message's start.
			announce.Store(uint32(need + int(int64(r.pos-r.tail.Load()))))
		}
		if ready() {
			announce.Store(0)
			return nil
		}
		futexWait(seq, s, shmPoll)
		announce.Store(0)
		if ready() {
			return nil
		}
		if err := b.failed(); err != nil {
			return err
		}
		if err := p.alive(sending); err != nil {
			return b.linkError(p, sending, err)
		}
		if time.Now().After(deadline) {
			return b.linkError(p, sending, os.ErrDeadlineExceeded)
		}
	}
}

// alive reports whether p's socket is still open, without reading from it:
// a peer that exited, crashed or closed its communicator reads EOF. sending
// picks the direction's check (see tcpPeer.peek); it allocates nothing,
// since the waits that call it must not either.
func (p *tcpPeer) alive(sending bool) error {
	k := &p.peek[0]
	if sending {
		k = &p.peek[1]
	}
	k.err = nil
	if err := p.raw.Read(k.fn); err != nil {
		return err
	}
	return k.err
}

// shmPut writes all of buf, waiting for room (the sender goroutine's
// path); start: buf is a whole message, not the rest of one.
func (b *tcpBackend) shmPut(p *tcpPeer, buf []byte, start bool) error {
	r := p.shm.out
	if start {
		r.beginMessage()
	}
	for {
		buf = buf[r.write(buf):]
		if len(buf) == 0 {
			break
		}
		need := min(len(buf), shmChunk, len(r.data))
		if err := b.shmWait(p, r, true, need); err != nil {
			return err
		}
	}
	return nil
}

// shmSend is send on a same-host link: what fits goes into the ring now,
// the rest through p's sender goroutine.
func (b *tcpBackend) shmSend(p *tcpPeer, buf []byte) uint64 {
	hdr := p.hdrOut != b.seq
	p.hdrOut = b.seq
	if p.acked.Load() == p.enq { // the sender is idle: we may write
		r := p.shm.out
		if hdr {
			r.beginMessage()
			if r.room() < hdrLen {
				goto queue
			}
			r.write(b.hdr[:])
			hdr = false
		}
		r.beginMessage()
		if buf = buf[r.write(buf):]; len(buf) == 0 {
			return p.enq
		}
		b.enqueueShm(p, buf, false) // the rest of the message
		return p.enq
	}
queue:
	if hdr {
		b.enqueueShm(p, b.hdr[:], true)
	}
	b.enqueueShm(p, buf, true)
	return p.enq
}

// shmRead fills buf from the ring, waiting for the data.
func (b *tcpBackend) shmRead(p *tcpPeer, buf []byte) error {
	r := p.shm.in
	r.beginRead()
	for len(buf) > 0 {
		if err := b.shmWait(p, r, false, r.readNeed(len(buf))); err != nil {
			return err
		}
		for len(buf) > 0 {
			run := r.next(len(buf))
			if len(run) == 0 {
				break
			}
			n := copy(buf, run)
			buf = buf[n:]
			r.consume(n)
		}
	}
	return nil
}

// shmRecvHeader reads and checks the call header if this is the call's
// first message from p.
func (b *tcpBackend) shmRecvHeader(p *tcpPeer) error {
	if p.hdrIn == b.seq {
		return nil
	}
	p.hdrIn = b.seq
	h := b.rsmall[:hdrLen]
	if err := b.shmRead(p, h); err != nil {
		return err
	}
	return b.checkHeader(p, h)
}

// shmRecvReduce sets dst = in op local, where in is p's next message of
// dst.Len elements, reduced straight out of the ring as it arrives.
func (b *tcpBackend) shmRecvReduce(p *tcpPeer, dst, local backend.Buffer, op backend.Op) error {
	if err := b.shmRecvHeader(p); err != nil {
		return err
	}
	r, es := p.shm.in, dst.Type.Size()
	r.beginRead()
	for i := 0; i < dst.Len; {
		if err := b.shmWait(p, r, false, r.readNeed((dst.Len-i)*es)); err != nil {
			return err
		}
		for i < dst.Len {
			// Messages start 8-byte aligned and the ring's size is a
			// multiple of 8: no element straddles the wrap.
			run := r.next((dst.Len - i) * es)
			k := len(run) / es
			if k == 0 {
				break
			}
			backend.Reduce(dst.Slice(i, i+k), bufferIn(run, k, dst.Type), local.Slice(i, i+k), op)
			r.consume(k * es)
			i += k
		}
	}
	return nil
}

// recvReduce sets dst = (p's next message) op local.
func (b *tcpBackend) recvReduce(p *tcpPeer, dst, local backend.Buffer, op backend.Op) error {
	if p.shm != nil {
		return b.shmRecvReduce(p, dst, local, op)
	}
	in := bufferIn(grow(&b.scratch, dst.Len*dst.Type.Size()), dst.Len, dst.Type)
	if err := b.recv(p, in.Bytes()); err != nil {
		return err
	}
	backend.Reduce(dst, in, local, op)
	return nil
}

// SharedMemory reports whether the link to rank carries its data through
// shared memory rather than TCP. Exported for collective's tests, which
// check a real world's links through the backend interface.
func (b *tcpBackend) SharedMemory(rank int) bool {
	p := b.peers[rank]
	return p != nil && p.shm != nil
}

// shmNeighbour: the links that get shared memory are those between ring
// neighbours.
func shmNeighbour(a, b, n int) bool {
	d := mod(a-b, n)
	return d == 1 || d == n-1
}

// The offer on a neighbour link, lower rank to higher: the file's name and
// the nonce written in it; an empty body offers nothing.
const (
	tcpMsgShmOffer = 0x40 + iota
	tcpMsgShmReply // body: "" (mapped and verified) or why not
)

// setupShm turns the neighbour links to same-host ranks into shared-memory
// links. Any failure only leaves a link on TCP; it is logged. Each lower
// rank first offers on all its links, then each higher rank answers, then
// the offers' makers read the answers: no rank waits for one that waits.
func (b *tcpBackend) setupShm(deadline time.Time) error {
	mine, theirs := b.shmNeighbours()
	for _, p := range slices.Concat(mine, theirs) {
		p.conn.SetDeadline(deadline)
	}
	defer func() {
		for _, p := range b.peers {
			if p != nil {
				p.conn.SetDeadline(time.Time{})
			}
		}
	}()
	files := make(map[*tcpPeer]*shmFile) // offered, not yet answered
	defer func() {
		for _, f := range files {
			f.remove()
		}
	}()
	if err := b.offerShm(mine, files); err != nil {
		return err
	}
	if err := b.answerShm(theirs); err != nil {
		return err
	}
	return b.completeShm(mine, files)
}

// shmNeighbours are the links that may get shared memory: those where this
// rank creates the file (to higher ranks) and those where it is offered one.
func (b *tcpBackend) shmNeighbours() (mine, theirs []*tcpPeer) {
	n, me := b.o.Size, b.o.Rank
	for _, p := range b.peers {
		switch {
		case p == nil || !shmNeighbour(me, p.rank, n):
		case me < p.rank:
			mine = append(mine, p)
		default:
			theirs = append(theirs, p)
		}
	}
	return mine, theirs
}

// offerShm creates a file per link in mine and offers it (or offers
// nothing where shared memory is off or the file could not be made).
func (b *tcpBackend) offerShm(mine []*tcpPeer, files map[*tcpPeer]*shmFile) error {
	on := !b.o.NoShm && shmSupported
	if len(mine) > 0 && on {
		shmSweep.Do(func() { sweepShm(time.Now()) })
	}
	for _, p := range mine {
		var body []byte
		if on {
			f, err := createShm(shmRingBytes)
			if err != nil {
				b.o.Logf("tcp: rank %d: no shared memory for rank %d, staying on TCP: %v", b.o.Rank, p.rank, err)
			} else {
				files[p] = f
				body = append([]byte(f.name+"\x00"), f.nonce...)
			}
		}
		if err := rendezvous.WriteMsg(p.conn, tcpMsgShmOffer, body); err != nil {
			return b.linkError(p, true, err)
		}
	}
	return nil
}

// answerShm reads the offer on each link in theirs and answers it.
func (b *tcpBackend) answerShm(theirs []*tcpPeer) error {
	for _, p := range theirs {
		body, err := readShmMsg(p, tcpMsgShmOffer, "offer")
		if err != nil {
			return b.linkError(p, false, err)
		}
		why := "not offered"
		if len(body) > 0 {
			why = b.acceptShm(p, body)
		}
		if err := rendezvous.WriteMsg(p.conn, tcpMsgShmReply, []byte(why)); err != nil {
			return b.linkError(p, true, err)
		}
		if why != "" && len(body) > 0 {
			b.o.Logf("tcp: rank %d: link to rank %d stays on TCP: %s", b.o.Rank, p.rank, why)
		}
	}
	return nil
}

// completeShm reads the answers to this rank's offers: a link whose offer
// was taken moves to shared memory.
func (b *tcpBackend) completeShm(mine []*tcpPeer, files map[*tcpPeer]*shmFile) error {
	for _, p := range mine {
		body, err := readShmMsg(p, tcpMsgShmReply, "reply")
		if err != nil {
			return b.linkError(p, false, err)
		}
		f := files[p]
		if f == nil {
			continue
		}
		if len(body) == 0 {
			p.shm = newShmLink(f.mem, shmRingBytes, true)
			f.mem = nil // kept by the link
		}
		// The peer has mapped it or refused: the name has served, and a
		// process killed from here on leaves nothing in /dev/shm.
		f.remove()
		delete(files, p)
	}
	return nil
}

// shmSweep runs sweepShm once per process, before its first link file.
var shmSweep sync.Once

// readShmMsg reads the next message of setupShm's exchange on p's link,
// which must be of type want (what names it in the error).
func readShmMsg(p *tcpPeer, want byte, what string) ([]byte, error) {
	typ, body, err := rendezvous.ReadMsg(p.conn, 4096)
	if err == nil && typ != want {
		err = fmt.Errorf("message type %d, expected a shared memory %s", typ, what)
	}
	return body, err
}

// acceptShm maps the offered file and checks its nonce: "" when the link
// is now shared memory, else why not (a different host, most likely).
func (b *tcpBackend) acceptShm(p *tcpPeer, body []byte) string {
	if b.o.NoShm || !shmSupported {
		return "shared memory is off here"
	}
	name, nonce, ok := bytes.Cut(body, []byte{0})
	if !ok || len(nonce) != shmNonceSz {
		return "malformed offer"
	}
	mem, err := openShm(string(name))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "another host (the offered file is not here)"
		}
		return err.Error()
	}
	ringBytes := int(binary.NativeEndian.Uint64(mem[shmCapAt:])) // as createShm wrote it
	switch {
	case string(mem[:len(shmMagic)]) != shmMagic,
		string(mem[shmNonceAt:shmNonceAt+shmNonceSz]) != string(nonce),
		ringBytes <= 0 || ringBytes%8 != 0 || shmSize(ringBytes) != len(mem):
		unmapShm(mem)
		return "the offered file is not the one rank " + fmt.Sprint(p.rank) + " wrote"
	}
	p.shm = newShmLink(mem, ringBytes, false)
	return ""
}
