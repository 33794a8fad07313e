package collective

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
// 0 sends everyone the table; each rank k dials ranks k+1.. and accepts
// ranks 1..k-1. The rendezvous connections double as the mesh links to rank
// 0. Each rank reports its links up to rank 0, which answers ready (or
// abort, with the reason, to everyone), so newTCP fails or succeeds on all
// ranks together. Then every listener is closed.

const (
	joinLen = 2 + net.IPv6len // listener port, IP (IPv4 in 16-byte form)
	// rendezvousGrace: a rank that reached rank 0 waits for rank 0's
	// verdict this long beyond its own deadline, since rank 0 (which may
	// have started later) enforces the timeout and names the missing ranks.
	rendezvousGrace = 2 * time.Second
	keepAlivePeriod = 15 * time.Second
	meshDialTimeout = 10 * time.Second
)

// tcpTestHookMeshListener, when set (tests only), learns each rank's mesh
// listener address as soon as it accepts connections; the rank waits for
// it to return.
var tcpTestHookMeshListener func(rank int, addr net.Addr)

func (o *tcpOptions) masterHostPort() string {
	return net.JoinHostPort(o.MasterAddr, strconv.Itoa(o.MasterPort))
}

// rendezvous returns one connection per rank (nil at o.Rank).
func rendezvous(o *tcpOptions) ([]*net.TCPConn, error) {
	if o.Rank == 0 {
		return rendezvousRoot(o, time.Now().Add(o.RendezvousTimeout))
	}
	return rendezvousPeer(o, time.Now().Add(o.RendezvousTimeout))
}

func setupConn(c *net.TCPConn) {
	// Errors here only lose an optimisation.
	c.SetNoDelay(true) // collectives are request/response: never wait for Nagle
	c.SetKeepAlive(true)
	c.SetKeepAlivePeriod(keepAlivePeriod)
	if sockBuf > 0 {
		c.SetReadBuffer(sockBuf)
		c.SetWriteBuffer(sockBuf)
	}
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
	o          *tcpOptions
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

// maxPendingSpare is how many handshakes beyond the world size an acceptor
// runs at once (a variable for tests).
var maxPendingSpare = 256

func startAcceptor(ln *net.TCPListener, o *tcpOptions, purpose uint8, extraLen int, deadline time.Time) *acceptor {
	a := &acceptor{ln: ln, o: o, purpose: purpose, extraLen: extraLen,
		out: make(chan *peerHello), stop: make(chan struct{}), pending: map[*net.TCPConn]struct{}{},
		maxPending: maxPendingSpare + o.Size}
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
	writeMsg(c, tcpMsgAbort, []byte(reason))
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

func rendezvousRoot(o *tcpOptions, deadline time.Time) (conns []*net.TCPConn, err error) {
	hostport := o.masterHostPort()
	l, err := net.Listen("tcp", ":"+strconv.Itoa(o.MasterPort))
	if err != nil {
		return nil, &SetupError{fmt.Errorf("rendezvous: rank 0 cannot listen on port %d: %w (another job or service may hold it: set MASTER_PORT to a free port)", o.MasterPort, err)}
	}
	acc := startAcceptor(l.(*net.TCPListener), o, purposeRendezv, joinLen, deadline)
	defer acc.close()

	conns = make([]*net.TCPConn, o.Size)
	joins := make([][]byte, o.Size)
	// On failure every joined rank learns why.
	abort := func(reason string) error {
		for _, c := range conns {
			if c != nil {
				refuse(c, reason)
			}
		}
		return errors.New(reason)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	timedOut := func(what string, pending func(r int) bool) error {
		var missing []int
		for r := 1; r < o.Size; r++ {
			if pending(r) {
				missing = append(missing, r)
			}
		}
		msg := fmt.Sprintf("rendezvous at %s timed out after %v: %s %s",
			hostport, o.RendezvousTimeout, rankList(missing, o.Size), what)
		if n := acc.refusedCount(); n > 0 {
			msg += fmt.Sprintf(" (%d connection(s) refused meanwhile: a wrong job token, or not a batchkit rank; see the log)", n)
		}
		return abort(msg)
	}

	for n := 1; n < o.Size; {
		select {
		case p := <-acc.out:
			r := int(p.rank)
			if reason := checkPeer(&p.hello, o, purposeRendezv); reason != "" {
				refuse(p.conn, reason)
				return nil, &SetupError{abort("rendezvous: " + reason)}
			}
			if conns[r] != nil && gone(conns[r]) { // it gave up on us and retried
				conns[r].Close()
				conns[r] = nil
				n--
			}
			if conns[r] != nil {
				reason := fmt.Sprintf("rendezvous: rank %d joined twice, from %s and from %s: two processes were given the same rank",
					r, conns[r].RemoteAddr(), p.conn.RemoteAddr())
				refuse(p.conn, reason)
				return nil, &SetupError{abort(reason)}
			}
			p.conn.SetWriteDeadline(deadline)
			if err := writeMsg(p.conn, tcpMsgAccept, nil); err != nil {
				o.Logf("collective: rank %d at %s left during the rendezvous: %v", r, p.conn.RemoteAddr(), err)
				p.conn.Close()
				continue // it may retry
			}
			conns[r], joins[r] = p.conn, p.extra
			n++
		case <-timer.C:
			return nil, timedOut("never connected", func(r int) bool { return conns[r] == nil })
		}
	}
	acc.close()

	table := make([]byte, 0, o.Size*joinLen)
	for r := range o.Size {
		if r == 0 {
			table = append(table, make([]byte, joinLen)...)
		} else {
			table = append(table, joins[r]...)
		}
	}
	for r := 1; r < o.Size; r++ {
		conns[r].SetWriteDeadline(deadline)
		if err := writeMsg(conns[r], tcpMsgTable, table); err != nil {
			return nil, abort(fmt.Sprintf("rendezvous: sending the address table to rank %d: %v", r, err))
		}
	}

	// Wait for every rank's mesh links.
	type report struct {
		rank int
		typ  byte
		body []byte
		err  error
	}
	reports := make(chan report, o.Size)
	for r := 1; r < o.Size; r++ {
		c := conns[r]
		c.SetReadDeadline(deadline)
		go func() {
			typ, body, err := readMsg(c, 1<<16)
			reports <- report{r, typ, body, err}
		}()
	}
	done := make([]bool, o.Size)
	for n := 1; n < o.Size; n++ {
		var rep report
		select {
		case rep = <-reports:
		case <-timer.C:
			return nil, timedOut("did not finish connecting to their peers", func(r int) bool { return !done[r] })
		}
		switch {
		case rep.err != nil:
			return nil, abort(fmt.Sprintf("rendezvous: rank %d left while building the mesh: %v", rep.rank, rep.err))
		case rep.typ == tcpMsgAbort:
			return nil, abort(string(rep.body))
		case rep.typ != tcpMsgMeshOK:
			return nil, abort(fmt.Sprintf("rendezvous: rank %d sent message type %d while building the mesh", rep.rank, rep.typ))
		}
		done[rep.rank] = true
	}
	for r := 1; r < o.Size; r++ {
		conns[r].SetWriteDeadline(deadline)
		if err := writeMsg(conns[r], tcpMsgReady, nil); err != nil {
			return nil, abort(fmt.Sprintf("rendezvous: rank %d left: %v", r, err))
		}
	}
	for _, c := range conns[1:] {
		c.SetDeadline(time.Time{})
	}
	return conns, nil
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
func dialPeer(o *tcpOptions, addr string, want int, purpose uint8, extra func(local net.Addr) []byte, until time.Time) (*net.TCPConn, error) {
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
			return nil, &authError{err} // no retry makes the name resolve
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
	var de *net.DNSError
	return errors.As(err, &ae) || (errors.As(err, &de) && de.IsNotFound)
}

func rendezvousPeer(o *tcpOptions, deadline time.Time) ([]*net.TCPConn, error) {
	hostport := o.masterHostPort()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{}) // all interfaces, ephemeral port
	if err != nil {
		return nil, fmt.Errorf("rendezvous: rank %d cannot open a listener: %w", o.Rank, err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	join := func(local net.Addr) []byte {
		b := make([]byte, joinLen)
		binary.LittleEndian.PutUint16(b, uint16(port))
		copy(b[2:], local.(*net.TCPAddr).IP.To16())
		return b
	}
	c0, err := dialPeer(o, hostport, 0, purposeRendezv, join, deadline)
	if err != nil {
		if badAddress(err) {
			return nil, &SetupError{fmt.Errorf("rendezvous: MASTER_ADDR %q: %w", o.MasterAddr, err)}
		}
		var ae *authError
		if errors.As(err, &ae) {
			return nil, &SetupError{fmt.Errorf("rendezvous at %s: %w", hostport, err)}
		}
		return nil, fmt.Errorf("rendezvous: could not reach rank 0 at %s within %v: %w", hostport, o.RendezvousTimeout, err)
	}
	conns := make([]*net.TCPConn, o.Size)
	conns[0] = c0
	ok := false
	defer func() {
		if !ok {
			for _, c := range conns {
				if c != nil {
					c.Close()
				}
			}
		}
	}()
	late := time.Now().Add(o.RendezvousTimeout + rendezvousGrace)
	fromRoot := func(want byte) ([]byte, error) {
		c0.SetReadDeadline(late)
		typ, body, err := readMsg(c0, o.Size*joinLen+1<<16)
		switch {
		case err != nil:
			return nil, fmt.Errorf("rendezvous: lost rank 0 at %s: %w", hostport, err)
		case typ == tcpMsgAbort:
			return nil, fmt.Errorf("rendezvous failed (reported by rank 0): %s", body)
		case typ != want:
			return nil, fmt.Errorf("rendezvous: rank 0 sent message type %d, expected %d", typ, want)
		}
		return body, nil
	}
	table, err := fromRoot(tcpMsgTable)
	if err != nil {
		return nil, err
	}
	if len(table) != o.Size*joinLen {
		return nil, fmt.Errorf("rendezvous: address table of %d bytes for %d ranks", len(table), o.Size)
	}
	addr := func(r int) string {
		e := table[r*joinLen:]
		return net.JoinHostPort(net.IP(e[2:joinLen]).String(), strconv.Itoa(int(binary.LittleEndian.Uint16(e))))
	}

	// Mesh: dial up, accept down, and listen to rank 0 for an abort.
	acc := startAcceptor(ln, o, purposeMesh, 0, late)
	defer acc.close()
	if tcpTestHookMeshListener != nil {
		tcpTestHookMeshListener(o.Rank, ln.Addr())
	}
	type dialed struct {
		rank int
		c    *net.TCPConn
		err  error
	}
	dials := make(chan dialed, o.Size)
	for r := o.Rank + 1; r < o.Size; r++ {
		go func() {
			// Its listener is up already: retry briefly, then tell rank 0 why.
			c, err := dialPeer(o, addr(r), r, purposeMesh, nil, earlier(late, time.Now().Add(meshDialTimeout)))
			if err != nil {
				err = fmt.Errorf("rank %d cannot connect to rank %d at %s: %w", o.Rank, r, addr(r), err)
			}
			dials <- dialed{r, c, err}
		}()
	}
	verdict := make(chan error, 1)
	go func() {
		_, err := fromRoot(tcpMsgReady)
		verdict <- err
	}()
	timer := time.NewTimer(time.Until(late))
	defer timer.Stop()
	var meshErr error
	dialsLeft := o.Size - 1 - o.Rank
	defer func() {
		if !ok { // dials still running must not leak their connections
			go func(n int) {
				for ; n > 0; n-- {
					if d := <-dials; d.c != nil {
						d.c.Close()
					}
				}
			}(dialsLeft)
		}
	}()
	for need := o.Size - 2; need > 0 && meshErr == nil; {
		select {
		case p := <-acc.out:
			r := int(p.rank)
			reason := checkPeer(&p.hello, o, purposeMesh)
			if reason == "" && (r >= o.Rank || conns[r] != nil) {
				reason = fmt.Sprintf("rank %d already has a link from rank %d", o.Rank, r)
			}
			if reason != "" {
				o.Logf("collective: rank %d refused a connection from %s: %s", o.Rank, p.conn.RemoteAddr(), reason)
				refuse(p.conn, reason)
				continue
			}
			p.conn.SetWriteDeadline(late)
			if err := writeMsg(p.conn, tcpMsgAccept, nil); err != nil {
				meshErr = fmt.Errorf("rank %d: accepting rank %d: %w", o.Rank, r, err)
				p.conn.Close()
				break
			}
			p.conn.SetDeadline(time.Time{})
			conns[r] = p.conn
			need--
		case d := <-dials:
			dialsLeft--
			if d.err != nil {
				meshErr = d.err
				break
			}
			conns[d.rank] = d.c
			need--
		case err := <-verdict:
			if err == nil {
				err = errors.New("rendezvous: rank 0 declared the mesh ready before this rank's links were up")
			}
			return nil, err
		case <-timer.C:
			var missing []string
			for r := 1; r < o.Size; r++ {
				if r != o.Rank && conns[r] == nil {
					missing = append(missing, strconv.Itoa(r))
				}
			}
			meshErr = fmt.Errorf("rank %d: no link to ranks %s after %v", o.Rank, strings.Join(missing, ", "), o.RendezvousTimeout)
		}
	}
	acc.close()
	if meshErr != nil {
		// Rank 0 relays the reason to everyone; dialers still running
		// give up at `late` and their connections are closed by then.
		c0.SetWriteDeadline(time.Now().Add(time.Second))
		writeMsg(c0, tcpMsgAbort, []byte("rendezvous: "+meshErr.Error()))
		return nil, fmt.Errorf("rendezvous: %w", meshErr)
	}
	c0.SetWriteDeadline(late)
	if err := writeMsg(c0, tcpMsgMeshOK, nil); err != nil {
		return nil, fmt.Errorf("rendezvous: lost rank 0 at %s: %w", hostport, err)
	}
	if err := <-verdict; err != nil {
		return nil, err
	}
	for _, c := range conns {
		if c != nil {
			c.SetDeadline(time.Time{})
		}
	}
	ok = true
	return conns, nil
}
