package rendezvous

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rendezvous and mesh building.
//
// Rank 0 listens at :MASTER_PORT. Every other rank opens a listener on an
// ephemeral port, dials rank 0 (retrying: rank 0 may start later), and after
// the handshake announces where its listener is (the local IP of its
// connection to rank 0 plus the listener's port). When all have joined, rank
// 0 sends everyone the table; each rank k dials the ranks above it that it
// links to and accepts those below (ConnectLinks: package tcp says which, the
// same on both sides of a link). The rendezvous connections double as the
// links to rank 0. Each rank reports its links up to rank 0, which answers
// ready (or abort, with the reason, to everyone), so New fails or succeeds on
// all ranks together. Then every listener is closed, and the connections to
// rank 0 that are not links with it.
//
// Rank 0's steps are rootRendezvous's (root.go), the other ranks'
// peerRendezvous's (peer.go); this file holds what
// both use: the acceptor, dialPeer and the address table's encoding.

const (
	joinLen = 2 + net.IPv6len // listener port, IP (IPv4 in 16-byte form)
	// nameLen: after its join record a rank names its backend, so that
	// rank 0 can say which ranks were given another --backend.
	nameLen = 16
	// rendezvousGrace: a rank that reached rank 0 waits for rank 0's
	// verdict this long beyond its own deadline, since rank 0 (which may
	// have started later) enforces the timeout and names the missing ranks.
	rendezvousGrace = 2 * time.Second
	keepAlivePeriod = 15 * time.Second
	meshDialTimeout = 10 * time.Second
)

// TestHookMeshListener, when set (tests only), learns each rank's mesh
// listener address as soon as it accepts connections; the rank waits for
// it to return.
var TestHookMeshListener func(rank int, addr net.Addr)

func (o *Options) masterHostPort() string {
	return net.JoinHostPort(o.MasterAddr, strconv.Itoa(o.MasterPort))
}

// purpose is the hello's purpose at MASTER_PORT: the TCP backend's own
// rendezvous, or a star's (star.go).
func (o *Options) purpose() uint8 {
	if o.star != nil {
		return purposeStar
	}
	return purposeRendezv
}

// backendName is what this rank says it runs at the rendezvous.
func (o *Options) backendName() string {
	if o.star != nil {
		return o.star.backend
	}
	return "tcp"
}

// nameRecord is a backend's name in nameLen bytes, zero-padded.
func nameRecord(name string) []byte {
	b := make([]byte, nameLen)
	copy(b, name)
	return b
}

// nameOf reads a join's backend name.
func nameOf(extra []byte) string {
	if len(extra) < joinLen+nameLen {
		return "?"
	}
	return strings.TrimRight(string(extra[joinLen:joinLen+nameLen]), "\x00")
}

// Connect runs the rendezvous of a full mesh (and of a star, which has its
// own links): ConnectLinks to every other rank.
func Connect(o *Options) ([]*net.TCPConn, error) {
	every := make([]int, 0, o.Size)
	for r := range o.Size {
		if r != o.Rank {
			every = append(every, r)
		}
	}
	return ConnectLinks(o, every)
}

// ConnectLinks runs the rendezvous and returns one authenticated connection
// per rank in links (nil elsewhere), or the error every rank gets. links
// must be symmetric across the world: rank r lists s exactly when s lists r.
func ConnectLinks(o *Options, links []int) ([]*net.TCPConn, error) {
	isLink := make([]bool, o.Size)
	for _, r := range links {
		if r < 0 || r >= o.Size || r == o.Rank {
			return nil, fmt.Errorf("rendezvous: rank %d cannot link to rank %d in a world of %d", o.Rank, r, o.Size)
		}
		isLink[r] = true
	}
	if err := checkFileLimit(o, isLink); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(o.RendezvousTimeout)
	if o.Rank == 0 {
		return rendezvousRoot(o, isLink, deadline)
	}
	return rendezvousPeer(o, isLink, deadline)
}

func setupConn(c *net.TCPConn) {
	// Errors here only lose an optimisation.
	c.SetNoDelay(true) // collectives are request/response: never wait for Nagle
	c.SetKeepAlive(true)
	c.SetKeepAlivePeriod(keepAlivePeriod)
}

// acceptor accepts and authenticates connections in the background; a
// connection that fails the handshake is logged and dropped while the
// listener keeps accepting, so it cannot take a rank's slot. Accept errors
// (out of file descriptors, say, under a flood of connections) are retried
// after a pause, and at most maxPending handshakes are in flight: a flood of
// silent connections cannot stop the rank from accepting its peers, which
// retry their dials until the rendezvous deadline.
type acceptor struct {
	ln         *net.TCPListener
	o          *Options
	purpose    uint8
	extraLen   int
	out        chan *peerHello
	stop       chan struct{}
	wg         sync.WaitGroup
	mu         sync.Mutex
	pending    map[*net.TCPConn]struct{} // handshakes in flight
	maxPending int
	refused    int // connections that failed the handshake or were over maxPending
	stopped    bool
}

// acceptRetryMax bounds the pause between accept attempts after errors.
const acceptRetryMax = time.Second

// MaxPendingSpare is how many handshakes beyond the world size an acceptor
// runs at once (a variable for tests).
var MaxPendingSpare = 256

func startAcceptor(ln *net.TCPListener, o *Options, purpose uint8, extraLen int, deadline time.Time) *acceptor {
	a := &acceptor{ln: ln, o: o, purpose: purpose, extraLen: extraLen,
		out: make(chan *peerHello), stop: make(chan struct{}), pending: map[*net.TCPConn]struct{}{},
		maxPending: MaxPendingSpare + o.Size}
	a.wg.Add(1)
	go a.loop(deadline)
	return a
}

func (a *acceptor) loop(deadline time.Time) {
	defer a.wg.Done()
	var pause time.Duration
	for {
		c, err := a.ln.AcceptTCP()
		if err != nil {
			if a.isStopped() || errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), acceptRetryMax)
			a.o.Logf("collective: rank %d: accept: %v (retrying in %v)", a.o.Rank, err, pause)
			select {
			case <-time.After(pause):
			case <-a.stop:
				return
			}
			continue
		}
		pause = 0
		a.mu.Lock()
		if a.stopped {
			a.mu.Unlock()
			c.Close()
			return
		}
		if len(a.pending) >= a.maxPending {
			a.refused++
			a.mu.Unlock()
			c.Close()
			continue
		}
		a.pending[c] = struct{}{}
		a.mu.Unlock()
		setupConn(c)
		a.wg.Add(1)
		go a.handshake(c, earlier(time.Now().Add(handshakeTimeout), deadline))
	}
}

func (a *acceptor) handshake(c *net.TCPConn, deadline time.Time) {
	defer a.wg.Done()
	p, err := acceptHandshake(c, a.o, a.purpose, a.extraLen, deadline)
	if err != nil {
		// A refusal on content is logged even while stopping; a broken-off
		// handshake then is our own doing.
		var hio *handshakeIOError
		if !errors.As(err, &hio) || !a.isStopped() {
			a.o.Logf("collective: rank %d refused a connection from %s: %v", a.o.Rank, c.RemoteAddr(), err)
			a.mu.Lock()
			a.refused++
			a.mu.Unlock()
		}
		a.drop(c)
		return
	}
	a.mu.Lock()
	delete(a.pending, c)
	a.mu.Unlock()
	select {
	case a.out <- p:
	case <-a.stop:
		c.Close()
	}
}

// refusedCount is how many connections the acceptor has turned away.
func (a *acceptor) refusedCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused
}

func (a *acceptor) drop(c *net.TCPConn) {
	a.mu.Lock()
	delete(a.pending, c)
	a.mu.Unlock()
	c.Close()
}

func (a *acceptor) isStopped() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stopped
}

// close stops accepting, drops handshakes in flight and closes the listener.
func (a *acceptor) close() {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return
	}
	a.stopped = true
	for c := range a.pending {
		c.Close()
	}
	a.mu.Unlock()
	close(a.stop)
	a.ln.Close()
	a.wg.Wait()
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// refuse tells an authenticated peer why it is turned away, best effort.
func refuse(c net.Conn, reason string) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	WriteMsg(c, tcpMsgAbort, []byte(reason))
	c.Close()
}

// rankList formats missing ranks: "rank 2 of 4", "ranks 2, 3 of 4".
func rankList(ranks []int, size int) string {
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = strconv.Itoa(r)
	}
	noun := "rank"
	if len(ranks) > 1 {
		noun = "ranks"
	}
	return fmt.Sprintf("%s %s of %d", noun, strings.Join(s, ", "), size)
}

// gone reports whether a joined rank's connection is closed. A live one
// stays silent until rank 0 sends the table, so a short read times out.
func gone(c *net.TCPConn) bool {
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// dialPeer connects to want at addr and runs the handshake, retrying
// until `until` on errors that retrying may fix (rank 0 not up yet).
func dialPeer(o *Options, addr string, want int, purpose uint8, extra func(local net.Addr) []byte, until time.Time) (*net.TCPConn, error) {
	backoff := 20 * time.Millisecond
	var lastErr error
	for {
		left := time.Until(until)
		if left <= 0 {
			if lastErr == nil {
				lastErr = errors.New("no time left")
			}
			return nil, lastErr
		}
		d := net.Dialer{Timeout: min(left, handshakeTimeout), KeepAlive: keepAlivePeriod}
		c, err := d.Dial("tcp", addr)
		if badAddress(err) {
			return nil, &authError{Err: err} // no retry makes the name resolve
		}
		if err == nil {
			tc := c.(*net.TCPConn)
			setupConn(tc)
			var x []byte
			if extra != nil {
				x = extra(tc.LocalAddr())
			}
			err = dialHandshake(tc, o, purpose, want, x, earlier(time.Now().Add(handshakeTimeout), until))
			if err == nil {
				return tc, nil
			}
			tc.Close()
			var ae *authError
			if errors.As(err, &ae) {
				return nil, err
			}
		}
		lastErr = err
		time.Sleep(min(backoff, time.Until(until)))
		backoff = min(backoff*3/2, time.Second)
	}
}

// badAddress reports a dial error that retrying cannot fix: an address
// that does not parse, or a host name the resolver says does not exist
// (a resolver that cannot be reached is retried).
func badAddress(err error) bool {
	var ae *net.AddrError
	return errors.As(err, &ae) || notFound(err) != nil
}

// joinRecord is what a rank tells rank 0 when it joins: where its mesh
// listener is, as the port and the local IP of its connection to rank 0.
func joinRecord(port int, local net.Addr) []byte {
	b := make([]byte, joinLen, joinLen+nameLen)
	binary.LittleEndian.PutUint16(b, uint16(port))
	copy(b[2:], local.(*net.TCPAddr).IP.To16())
	return b
}

// joinTable is the address table rank 0 sends: every rank's join record,
// zeros for rank 0 itself.
func joinTable(joins [][]byte) []byte {
	table := make([]byte, 0, len(joins)*joinLen)
	for r, j := range joins {
		if r == 0 {
			j = make([]byte, joinLen)
		}
		table = append(table, j[:joinLen]...)
	}
	return table
}

// tableAddrs reads the address table of a world of size ranks: each
// rank's mesh listener as host:port.
func tableAddrs(table []byte, size int) ([]string, error) {
	if len(table) != size*joinLen {
		return nil, fmt.Errorf("rendezvous: address table of %d bytes for %d ranks", len(table), size)
	}
	addrs := make([]string, size)
	for r := range addrs {
		e := table[r*joinLen:]
		addrs[r] = net.JoinHostPort(net.IP(e[2:joinLen]).String(), strconv.Itoa(int(binary.LittleEndian.Uint16(e))))
	}
	return addrs, nil
}
