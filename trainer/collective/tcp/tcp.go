package tcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/batchkit/batchkit/trainer/collective/tcp/internal/rendezvous"
)

// The pure-Go TCP backend. internal/rendezvous links each rank to the ranks
// its algorithms talk to (peers.go), authenticated; algos.go runs the
// collectives over those links.
//
// Data plane: every link carries raw native-endian element bytes, with no
// framing beyond one 24-byte header per call and direction, sent before the
// first payload of the call on that link. The header names the call
// (sequence number, kind, op, type, count, root); the receiver compares it
// with its own, so ranks that issue different collectives get a clear error
// instead of reading each other's bytes.
//
// Sending never blocks the calling goroutine, so two peers writing big
// buffers to each other cannot deadlock: a send first writes whatever the
// socket takes at once (a non-blocking write, which for small messages is
// all of it: no goroutine hand-off on the latency path), and queues the
// rest for the peer's sender goroutine, fed through a channel of value
// structs. Each queued request has a ticket; before the caller reuses memory
// it sent, it waits for the sender to pass that ticket. The calling
// goroutine does all reading and reducing.
//
// On any error the backend closes every connection, so the peers' reads
// fail at once and the failure cascades through the world; the first error
// sticks and every later call returns it.

const (
	hdrLen = 24 // a multiple of 8: payloads after it stay float64-aligned
	// sendQueueLen bounds the requests queued per peer; a full queue blocks
	// the caller. No algorithm queues more than maxSegments+1 requests
	// before it next receives, so a ring of blocked callers cannot form.
	sendQueueLen = 4 * maxSegments
)

type callKind uint8

const (
	kindAllreduce callKind = 1 + iota
	kindBroadcast
	kindAllgather
	kindReduceScatter
	kindBarrier
)

var kindNames = [...]string{"", "allreduce", "broadcast", "allgather", "reducescatter", "barrier"}

type sendReq struct {
	b     []byte
	seq   uint64 // ticket
	start bool   // shared memory: b starts a message (else it ends one)
}

type tcpPeer struct {
	rank  int
	conn  *net.TCPConn
	raw   syscall.RawConn
	addr  string
	sendq chan sendReq
	shm   *shmLink // non-nil: the data goes through shared memory

	acked   atomic.Uint64 // last ticket the sender finished
	waiting atomic.Bool   // the caller sleeps on wake
	wake    chan struct{}

	// Touched only by the calling goroutine.
	enq    uint64 // last ticket queued
	hdrOut uint32 // seq of the last call whose header went out
	hdrIn  uint32
	stage  []byte // header + small payload, written in one go

	// The non-blocking write's arguments and results: fields, and a
	// callback made once, so that a write allocates nothing.
	tryBuf []byte
	tryN   int
	tryErr error
	tryFn  func(fd uintptr) bool

	// alive's checks, one per direction: the caller's receive and the
	// sender goroutine's send can wait on one peer at once.
	peek [2]tcpPeek
}

// tcpPeek is one direction's liveness check of a peer's socket (alive):
// the callback for RawConn.Read, made once so that a check allocates
// nothing, and where it leaves its result.
type tcpPeek struct {
	fn  func(fd uintptr) bool
	err error
	buf [1]byte
}

func newPeer(rank int, c *net.TCPConn) (*tcpPeer, error) {
	if sockBuf > 0 {
		// Errors here only lose an optimisation.
		c.SetReadBuffer(sockBuf)
		c.SetWriteBuffer(sockBuf)
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	p := &tcpPeer{rank: rank, conn: c, raw: raw, addr: c.RemoteAddr().String(),
		sendq: make(chan sendReq, sendQueueLen), wake: make(chan struct{}, 1),
		stage: make([]byte, hdrLen+inlineMax)}
	for i := range p.peek {
		k := &p.peek[i]
		k.fn = func(fd uintptr) bool {
			n, _, e := syscall.Recvfrom(int(fd), k.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case e == syscall.EAGAIN || e == syscall.EINTR:
			case e != nil:
				k.err = e
			case n == 0:
				k.err = io.EOF
			}
			return true
		}
	}
	p.tryFn = func(fd uintptr) bool {
		for p.tryN < len(p.tryBuf) {
			n, err := syscall.Write(int(fd), p.tryBuf[p.tryN:])
			if n > 0 {
				p.tryN += n
			}
			switch err {
			case nil:
			case syscall.EINTR:
			case syscall.EAGAIN:
				return true // full: the sender takes the rest
			default:
				p.tryErr = err
				return true
			}
		}
		return true // never wait
	}
	return p, nil
}

// tryWrite writes as much of buf as the socket takes without blocking.
func (p *tcpPeer) tryWrite(buf []byte) (int, error) {
	p.tryBuf, p.tryN, p.tryErr = buf, 0, nil
	err := p.raw.Write(p.tryFn)
	p.tryBuf = nil
	if err == nil {
		err = p.tryErr
	}
	return p.tryN, err
}

type tcpBackend struct {
	o     Options
	peers []*tcpPeer // by rank; nil at our own and where meshPeers has no link
	rd    rdPlan     // allreduceRD's partners
	quit  chan struct{}

	closeOnce sync.Once
	senders   sync.WaitGroup
	mu        sync.Mutex // guards err
	err       error

	// Call state, under callMu (the Comm serialises calls already; this
	// keeps direct users of the backend safe too).
	callMu  sync.Mutex
	seq     uint32
	hdr     [hdrLen]byte
	rsmall  []byte // header + small payload, read in one go
	scratch []byte // received segments, recursive-doubling partner data
	work    []byte // reduce-scatter partials
	tickets []uint64
}

func New(opts Options) (backend.Backend, error) {
	o, err := opts.WithDefaults()
	if err != nil {
		return nil, err
	}
	b := &tcpBackend{o: o, quit: make(chan struct{}), peers: make([]*tcpPeer, o.Size),
		rd: newRDPlan(o.Rank, o.Size), rsmall: make([]byte, hdrLen+inlineMax)}
	if o.Size == 1 {
		return b, nil
	}
	conns, err := rendezvous.ConnectLinks(&b.o, meshPeers(o.Rank, o.Size))
	if err != nil {
		return nil, err
	}
	for r, c := range conns {
		if c == nil {
			continue
		}
		p, err := newPeer(r, c)
		if err != nil {
			b.fail(err)
			return nil, err
		}
		b.peers[r] = p
	}
	if err := b.setupShm(time.Now().Add(o.RendezvousTimeout)); err != nil {
		b.Close()
		return nil, err
	}
	for _, p := range b.peers {
		if p != nil {
			b.senders.Add(1)
			go b.sender(p)
		}
	}
	return b, nil
}

func (b *tcpBackend) Name() string { return "tcp" }
func (b *tcpBackend) Rank() int    { return b.o.Rank }
func (b *tcpBackend) Size() int    { return b.o.Size }

// Close closes every connection, stops the senders and, once no call is
// running, unmaps the shared memory. Idempotent.
func (b *tcpBackend) Close() error {
	b.closeOnce.Do(func() {
		b.fail(backend.ErrClosed)
		close(b.quit)
		b.senders.Wait()
		b.callMu.Lock() // a running call sees the failure within shmPoll
		defer b.callMu.Unlock()
		for _, p := range b.peers {
			if p != nil && p.shm != nil {
				unmapShm(p.shm.mem)
				p.shm = nil
			}
		}
	})
	return nil
}

// fail records the first error and closes every connection, which makes
// each peer's next read fail: the failure reaches every rank promptly. It
// returns the first error.
func (b *tcpBackend) fail(err error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
		for _, p := range b.peers {
			if p != nil {
				p.conn.Close()
				if p.shm != nil {
					p.shm.wakeAll() // sleepers here and at the peer look again
				}
			}
		}
	}
	return b.err
}

func (b *tcpBackend) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// linkError explains an I/O error on the link to p and fails the backend.
func (b *tcpBackend) linkError(p *tcpPeer, sending bool, err error) error {
	if e := b.failed(); e != nil {
		return e // our own shutdown, or a consequence of the first error
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		if sending {
			err = fmt.Errorf("rank %d (%s) accepted no data for %v (the collective timeout): it is hung or in a different collective: %w",
				p.rank, p.addr, b.o.Timeout, err)
		} else {
			err = fmt.Errorf("nothing from rank %d (%s) for %v (the collective timeout): it is hung or in a different collective: %w",
				p.rank, p.addr, b.o.Timeout, err)
		}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		err = fmt.Errorf("lost the connection to rank %d (%s): it exited, failed or closed its communicator: %w", p.rank, p.addr, err)
	default:
		err = fmt.Errorf("link to rank %d (%s): %w", p.rank, p.addr, err)
	}
	return b.fail(err)
}

// sender writes p's queued buffers in order. After an error it keeps
// draining (skipping the writes) so that waiters still get their tickets.
func (b *tcpBackend) sender(p *tcpPeer) {
	defer b.senders.Done()
	broken := false
	for {
		select {
		case <-b.quit:
			return
		case r := <-p.sendq:
			switch {
			case broken:
			case p.shm != nil:
				broken = b.shmPut(p, r.b, r.start) != nil
			case len(r.b) > 0:
				broken = b.write(p, r.b) != nil
			}
			p.acked.Store(r.seq)
			if p.waiting.Load() {
				select {
				case p.wake <- struct{}{}:
				default:
				}
			}
		}
	}
}

// write is the sender's blocking write, bounded by the timeout.
func (b *tcpBackend) write(p *tcpPeer, buf []byte) error {
	p.conn.SetWriteDeadline(time.Now().Add(b.o.Timeout))
	_, err := p.conn.Write(buf)
	p.conn.SetWriteDeadline(time.Time{}) // or the next non-blocking write would see it expired
	if err != nil {
		return b.linkError(p, true, err)
	}
	return nil
}

// begin starts a call: it takes the call lock and writes the header.
func (b *tcpBackend) begin(kind callKind, op backend.Op, t backend.DType, count, root int) error {
	b.callMu.Lock()
	if err := b.failed(); err != nil {
		b.callMu.Unlock()
		return err
	}
	b.seq++
	h := b.hdr[:]
	h[0], h[1], h[2], h[3] = byte(kind), byte(op), byte(t), 0
	binary.LittleEndian.PutUint32(h[4:], b.seq)
	binary.LittleEndian.PutUint64(h[8:], uint64(count))
	binary.LittleEndian.PutUint64(h[16:], uint64(root))
	return nil
}

// end waits for every queued send of the call (the caller may reuse its
// buffers once we return) and releases the call lock.
func (b *tcpBackend) end(err error) error {
	for _, p := range b.peers {
		if p != nil {
			if e := b.waitSent(p, p.enq); e != nil && err == nil {
				err = e
			}
		}
	}
	if err != nil {
		err = b.fail(err)
	}
	b.callMu.Unlock()
	return err
}

func (b *tcpBackend) enqueue(p *tcpPeer, buf []byte) { b.enqueueShm(p, buf, false) }

func (b *tcpBackend) enqueueShm(p *tcpPeer, buf []byte, start bool) {
	p.enq++
	select {
	case p.sendq <- sendReq{buf, p.enq, start}:
	case <-b.quit:
	}
}

// send sends buf to p without blocking: what the socket takes now, the rest
// through p's sender. buf must stay unchanged until waitSent(p, ticket).
func (b *tcpBackend) send(p *tcpPeer, buf []byte) (ticket uint64, err error) {
	if p.shm != nil {
		return b.shmSend(p, buf), nil
	}
	if p.acked.Load() != p.enq { // the sender is busy: keep the order
		if p.hdrOut != b.seq {
			p.hdrOut = b.seq
			b.enqueue(p, b.hdr[:])
		}
		b.enqueue(p, buf)
		return p.enq, nil
	}
	out := buf
	if p.hdrOut != b.seq {
		p.hdrOut = b.seq
		if len(buf) <= inlineMax { // one packet for header and payload
			out = p.stage[:hdrLen+len(buf)]
			copy(out, b.hdr[:])
			copy(out[hdrLen:], buf)
		} else {
			n, err := p.tryWrite(b.hdr[:])
			if err != nil {
				return 0, b.linkError(p, true, err)
			}
			if n < hdrLen {
				b.enqueue(p, b.hdr[n:])
				b.enqueue(p, buf)
				return p.enq, nil
			}
		}
	}
	n, err := p.tryWrite(out)
	if err != nil {
		return 0, b.linkError(p, true, err)
	}
	if n < len(out) {
		b.enqueue(p, out[n:])
	}
	return p.enq, nil
}

// waitSent waits until p's sender has written everything up to ticket.
func (b *tcpBackend) waitSent(p *tcpPeer, ticket uint64) error {
	for p.acked.Load() < ticket {
		p.waiting.Store(true)
		if p.acked.Load() >= ticket { // no lost wake-up: the sender stores, then looks
			p.waiting.Store(false)
			break
		}
		select {
		case <-p.wake:
			p.waiting.Store(false)
		case <-b.quit:
			p.waiting.Store(false)
			return backend.ErrClosed
		}
	}
	return b.failed()
}

// recv reads exactly len(buf) bytes of payload from p, checking the call
// header first if this is the call's first message from p.
func (b *tcpBackend) recv(p *tcpPeer, buf []byte) error {
	if p.shm != nil {
		if err := b.shmRecvHeader(p); err != nil {
			return err
		}
		return b.shmRead(p, buf)
	}
	if p.hdrIn != b.seq {
		p.hdrIn = b.seq
		// Header and a small payload usually arrive in one packet: one
		// read. The header is checked as soon as it is in, so that a
		// mismatched call fails now rather than waiting for bytes that
		// will never come.
		in := b.rsmall[:hdrLen+min(len(buf), inlineMax)]
		got, err := b.readAtLeast(p, in, hdrLen)
		if err != nil {
			return err
		}
		if err := b.checkHeader(p, in[:hdrLen]); err != nil {
			return err
		}
		n := copy(buf, in[hdrLen:got])
		buf = buf[n:]
	}
	if len(buf) == 0 {
		return nil
	}
	_, err := b.readAtLeast(p, buf, len(buf))
	return err
}

func (b *tcpBackend) readAtLeast(p *tcpPeer, buf []byte, n int) (int, error) {
	p.conn.SetReadDeadline(time.Now().Add(b.o.Timeout))
	got, err := io.ReadAtLeast(p.conn, buf, n)
	if err != nil {
		return got, b.linkError(p, false, err)
	}
	return got, nil
}

func (b *tcpBackend) checkHeader(p *tcpPeer, h []byte) error {
	if bytes.Equal(h, b.hdr[:]) {
		return nil
	}
	return b.fail(fmt.Errorf("rank %d is in %s, this rank in %s: every rank must issue the same collectives in the same order",
		p.rank, describeHeader(h), describeHeader(b.hdr[:])))
}

func describeHeader(h []byte) string {
	kind, op, t := callKind(h[0]), backend.Op(h[1]), backend.DType(h[2])
	seq := binary.LittleEndian.Uint32(h[4:])
	count := binary.LittleEndian.Uint64(h[8:])
	root := binary.LittleEndian.Uint64(h[16:])
	name := fmt.Sprintf("kind %d", kind)
	if int(kind) < len(kindNames) && kind > 0 {
		name = kindNames[kind]
	}
	switch kind {
	case kindAllreduce, kindReduceScatter:
		name += "(" + op.String() + ")"
	case kindBroadcast:
		name += fmt.Sprintf("(root %d)", root)
	case kindBarrier:
		return fmt.Sprintf("collective #%d, barrier", seq)
	}
	return fmt.Sprintf("collective #%d, %s of %d %v", seq, name, count, t)
}

// grow returns n bytes of *buf, reallocated (float64-aligned) when short.
func grow(buf *[]byte, n int) []byte {
	if cap(*buf) < n {
		words := make([]float64, (n+7)/8)
		*buf = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)
	}
	return (*buf)[:n]
}

// bufferIn views the first n elements of type t of raw memory as a Buffer.
func bufferIn(mem []byte, n int, t backend.DType) backend.Buffer {
	if n == 0 {
		return backend.Buffer{Type: t}
	}
	return backend.Buffer{Ptr: unsafe.Pointer(unsafe.SliceData(mem)), Len: n, Type: t}
}
