package health

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/batchkit/batchkit/internal/bytesize"
	"github.com/batchkit/batchkit/internal/jobauth"
)

// The ring links: each rank's bandwidth to its ring neighbour (rank r to
// r+1 mod N, the link a ring allreduce streams over, crossing nodes where
// the rank order does), one pair at a time.
//
// Why a TCP connection of our own and not the backend's transport: the
// Comm has collectives only, and every collective moves data on every
// rank, so no sequence of them leaves one pair alone on the wire (the
// broadcast probe, ProbeLinks, is the closest, and its root's figure is
// every receiver's too). A point-to-point send in each backend would mean a
// new operation in the TCP, MPI and oneCCL bindings alike. So each rank
// opens one connection to its next rank, authenticated with the jobauth
// handshake under a secret rank 0 draws and the Comm carries (no job token
// is needed: Hydra, for one, gives none), and the pairs take turns between
// the Comm's barriers: the same code under every backend. What it measures
// is the hosts' TCP path, the one the tcp backend uses, not an MPI
// library's own fabric (InfiniBand verbs): the broadcast column stays the
// backend's. Every step is bounded by Timeout: a neighbour that does not
// answer leaves its link unmeasured, with the reason, never a hung report.

// RingOptions are ProbeRing's. Zero values take the defaults.
type RingOptions struct {
	Bytes   int           // sent over each link at each turn (RingBytes)
	Reps    int           // timed turns per link, the best kept (linkReps: ProbeLinks's)
	Timeout time.Duration // bounds the connection and each turn (RingTimeout)
	// Host is this rank's machine (Here): two ranks of one machine
	// connect over loopback, others over the addresses each announces.
	Host string

	// Test hooks: wrap the sending side of a link (a throttled link), and
	// a rank that goes silent (listens but never answers).
	wrap   func(from, to int, c net.Conn) net.Conn
	silent bool
}

// RingBytes and RingTimeout: 4 MiB a turn (about 1 ms at the GB/s of a
// node's loopback, 3.4 ms on 10 GbE), 5 s for anything to answer. The
// turns per link are the broadcast probe's (linkReps: 10 up to 25 ranks,
// about 256 in all above), after an untimed one; 5 left an even link at
// 0.45× the others in 1 of 8 in-process runs on this loaded 2-core
// machine, 15 at 0.68× at worst in 15.
const (
	RingBytes   = 4 << 20
	RingTimeout = 5 * time.Second
)

// RingLink is this rank's link to its next rank: its bandwidth in GB/s
// (1e9 B/s), or why it was not measured.
type RingLink struct {
	GBs float64
	Err string
}

// ringProtocol: the probe's own magic and labels, so that neither the
// collective's nor the fail-fast watcher's handshake passes for it.
var ringProtocol = jobauth.Protocol{Magic: "BKRL", Label: "batchkit health ring link",
	NotPeer: errors.New("not a batchkit health link probe")}

// ProbeRing measures, on every rank of c together, each rank's link to
// its next rank. Only the Comm's own failures are errors; a link that
// cannot be opened or stalls is a RingLink with Err, after Timeout at most.
func ProbeRing(c Comm, o RingOptions) (RingLink, error) {
	n, me := c.Size(), c.Rank()
	if n < 2 {
		return RingLink{}, nil
	}
	o = o.withDefaults(n)
	ln, lnErr := net.ListenTCP("tcp", &net.TCPAddr{})
	if ln != nil {
		defer ln.Close()
	}
	secret := make([]byte, secretLen)
	if _, err := rand.Read(secret); err != nil {
		return RingLink{}, fmt.Errorf("ring probe: random secret: %w", err)
	}
	cards, err := exchange(c, announce(ln, o.Host, secret))
	if err != nil {
		return RingLink{}, err
	}
	next, prev := (me+1)%n, (me+n-1)%n
	token := string(cards[0].secret)
	l := ring{o: o, me: me, next: next, prev: prev, buf: make([]byte, o.Bytes)}
	l.connect(ln, lnErr, cards, token)
	defer l.close()
	up, err := l.agree(c)
	if err != nil {
		return RingLink{}, err
	}
	for rep := range o.Reps + 1 {
		for k := range n {
			if err := c.Barrier(); err != nil {
				return RingLink{}, err
			}
			if up[k] {
				l.turn(k, (k+1)%n, rep > 0)
			}
		}
	}
	return l.result(), nil
}

func (o RingOptions) withDefaults(n int) RingOptions {
	if o.Bytes <= 0 {
		o.Bytes = RingBytes
	}
	if o.Reps <= 0 {
		o.Reps = linkReps(n)
	}
	if o.Timeout <= 0 {
		o.Timeout = RingTimeout
	}
	return o
}

// ring is one rank's two links: out to next (it dials, it sends), in
// from prev (it accepts, it receives).
type ring struct {
	o               RingOptions
	me, next, prev  int
	out, in         net.Conn
	outErr, inErr   error
	best            time.Duration
	buf             []byte
	outDone, inDone bool // failed during a turn: no more turns
}

// connect dials next and accepts prev at once, both bounded by Timeout.
func (l *ring) connect(ln *net.TCPListener, lnErr error, cards []card, token string) {
	deadline := time.Now().Add(l.o.Timeout)
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		switch {
		case lnErr != nil:
			l.inErr = fmt.Errorf("cannot listen: %w", lnErr)
		case l.o.silent:
			time.Sleep(time.Until(deadline))
			l.inErr = errors.New("silent (test)")
		default:
			l.in, l.inErr = acceptFrom(ln, token, l.prev, l.me, deadline, l.o.Timeout)
		}
	}()
	l.out, l.outErr = dialTo(cards[l.next], cards[l.me].host, token, l.me, l.next, deadline, l.o.Timeout)
	if l.out != nil && l.o.wrap != nil {
		l.out = l.o.wrap(l.me, l.next, l.out)
	}
	<-accepted
}

// agree tells every rank which links are open at both ends (an
// Allgather of each rank's two flags): up[k] is link k → k+1.
func (l *ring) agree(c Comm) ([]bool, error) {
	n := c.Size()
	recv := make([]float64, 2*n)
	if err := c.Allgather([]float64{flag(l.outErr == nil), flag(l.inErr == nil)}, recv); err != nil {
		return nil, fmt.Errorf("ring probe: %w", err)
	}
	up := make([]bool, n)
	for k := range n {
		up[k] = recv[2*k] == 1 && recv[2*((k+1)%n)+1] == 1
	}
	if !up[l.me] && l.outErr == nil {
		l.outErr = fmt.Errorf("rank %d did not take the connection within %v", l.next, l.o.Timeout)
	}
	return up, nil
}

func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// turn moves Bytes over link from → to when this rank is one of its ends;
// the sender times it up to the receiver's one-byte answer.
func (l *ring) turn(from, to int, timed bool) {
	deadline := time.Now().Add(l.o.Timeout)
	if from == l.me && !l.outDone {
		t0 := time.Now()
		if err := send(l.out, l.buf, deadline); err != nil {
			l.outErr, l.outDone = l.sendError(to, err), true
			l.out.Close()
			return
		}
		if d := time.Now().Sub(t0); timed && (l.best == 0 || d < l.best) {
			l.best = d
		}
	}
	if to == l.me && !l.inDone {
		if err := receive(l.in, l.buf, deadline); err != nil {
			l.inErr, l.inDone = err, true
			l.in.Close()
		}
	}
}

// sendError: a turn that timed out says so, with the size and the bound.
func (l *ring) sendError(to int, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%s to rank %d took over %v (%w)", bytesize.Format(int64(len(l.buf))), to, l.o.Timeout, err)
	}
	return fmt.Errorf("sending to rank %d: %w", to, err)
}

func send(c net.Conn, buf []byte, deadline time.Time) error {
	c.SetDeadline(deadline)
	if _, err := c.Write(buf); err != nil {
		return err
	}
	var ack [1]byte
	_, err := io.ReadFull(c, ack[:])
	return err
}

func receive(c net.Conn, buf []byte, deadline time.Time) error {
	c.SetDeadline(deadline)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	_, err := c.Write([]byte{1})
	return err
}

func (l *ring) result() RingLink {
	if l.outErr != nil {
		return RingLink{Err: l.outErr.Error()}
	}
	if l.best <= 0 {
		return RingLink{}
	}
	return RingLink{GBs: float64(len(l.buf)) / l.best.Seconds() / 1e9}
}

func (l *ring) close() {
	for _, c := range []net.Conn{l.out, l.in} {
		if c != nil {
			c.Close()
		}
	}
}

// acceptFrom takes the first connection that proves the secret and says
// it is link from → to; the others are closed. Each handshake runs on its
// own goroutine, so that a connection that says nothing (a port scanner)
// cannot keep the neighbour's waiting.
func acceptFrom(ln *net.TCPListener, token string, from, to int, deadline time.Time, timeout time.Duration) (net.Conn, error) {
	ln.SetDeadline(deadline)
	want := linkFields(from, to)
	won := make(chan net.Conn, 1)
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case c := <-won:
				return c, verdict(c, deadline)
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil, fmt.Errorf("rank %d did not connect within %v", from, timeout)
			}
			return nil, err
		}
		go func() {
			fields, _, err := ringProtocol.Accept(c, token, want, 0, deadline)
			if err == nil && string(fields) == string(want) {
				select {
				case won <- c:
					ln.SetDeadline(time.Now()) // stop accepting: the link is open
					return
				default:
				}
			}
			c.Close()
		}()
	}
}

// dialTo connects to rank to at the addresses its card announces
// (loopback first when it is on this machine) and proves the secret.
func dialTo(to card, myHost, token string, from, toRank int, deadline time.Time, timeout time.Duration) (net.Conn, error) {
	if to.port == 0 {
		return nil, fmt.Errorf("rank %d has no listener", toRank)
	}
	var ips []net.IP
	if to.host != "" && to.host == myHost {
		ips = append(ips, net.IPv4(127, 0, 0, 1))
	}
	ips = append(ips, to.ips...)
	if len(ips) == 0 {
		return nil, fmt.Errorf("rank %d (%s) announced no address", toRank, to.host)
	}
	var errs []error
	for _, ip := range ips {
		addr := net.JoinHostPort(ip.String(), strconv.Itoa(to.port))
		c, err := (&net.Dialer{Deadline: deadline}).Dial("tcp", addr)
		if err == nil {
			if err = ringProtocol.Dial(c, jobauth.Dialer{Token: token, Fields: linkFields(from, toRank), Verdict: readVerdict}, deadline); err == nil {
				return c, nil
			}
			c.Close()
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("rank %d did not answer within %v (%w)", toRank, timeout, errors.Join(errs...))
		}
	}
	return nil, fmt.Errorf("cannot connect to rank %d (%w)", toRank, errors.Join(errs...))
}

// verdict tells the dialer its link is taken.
func verdict(c net.Conn, deadline time.Time) error {
	c.SetWriteDeadline(deadline)
	defer c.SetWriteDeadline(time.Time{})
	if _, err := c.Write([]byte{1}); err != nil {
		c.Close()
		return err
	}
	return nil
}

func readVerdict(c net.Conn, _ []byte) error {
	var v [1]byte
	if _, err := io.ReadFull(c, v[:]); err != nil {
		return err
	}
	return nil
}

func linkFields(from, to int) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, uint32(from))
	binary.BigEndian.PutUint32(b[4:], uint32(to))
	return b
}
