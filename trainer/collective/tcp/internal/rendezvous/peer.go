package rendezvous

import (
	"errors"
	"fmt"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"net"
	"strconv"
	"strings"
	"time"
)

// peerRendezvous is the side of every rank but 0, in the order run takes
// its steps: listen (the mesh listener), joinRoot, readTable, startMesh
// (dial up, accept down, listen to rank 0), awaitLinks, then report to rank
// 0, wait for its verdict and keep only the connections that are links.
// rendezvousPeer releases what it holds in one place: the listener always
// (release), the links when a step failed (closeConns).
type peerRendezvous struct {
	o        *Options
	isLink   []bool // by rank: the ranks this one links to
	hostport string
	ln       *net.TCPListener
	late     time.Time      // rank 0's verdict is due by then (see rendezvousGrace)
	conns    []*net.TCPConn // by rank: 0 once joined, the others as the mesh forms
	acc      *acceptor      // the mesh listener's, from startMesh on
	dials    chan meshDial  // unbuffered: a dial nobody takes any more is closed
	quit     chan struct{}  // closed when the rendezvous is over
	verdict  chan error     // rank 0's verdict (nil: ready)
}

// meshDial is the outcome of dialing a higher rank.
type meshDial struct {
	rank int
	c    *net.TCPConn
	err  error
}

// meshError is a failure of this rank's mesh links, which it reports to
// rank 0 for everyone (as opposed to rank 0's own verdict).
type meshError struct{ err error }

func (e *meshError) Error() string { return e.err.Error() }
func (e *meshError) Unwrap() error { return e.err }

func rendezvousPeer(o *Options, isLink []bool, deadline time.Time) ([]*net.TCPConn, error) {
	if o.star != nil {
		return starPeer(o, deadline)
	}
	p, err := listenPeer(o)
	if err != nil {
		return nil, err
	}
	p.isLink = isLink
	defer p.release()
	if err := p.run(deadline); err != nil {
		p.closeConns()
		return nil, err
	}
	return p.conns, nil
}

// listenPeer opens this rank's mesh listener: all interfaces, an
// ephemeral port.
func listenPeer(o *Options) (*peerRendezvous, error) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{})
	if err != nil {
		return nil, fmt.Errorf("rendezvous: rank %d cannot open a listener: %w", o.Rank, err)
	}
	return &peerRendezvous{o: o, hostport: o.masterHostPort(), ln: ln,
		conns: make([]*net.TCPConn, o.Size), dials: make(chan meshDial),
		quit: make(chan struct{}), verdict: make(chan error, 1)}, nil
}

func (p *peerRendezvous) run(deadline time.Time) error {
	if err := p.joinRoot(deadline); err != nil {
		return err
	}
	addrs, err := p.readTable()
	if err != nil {
		return err
	}
	p.startMesh(addrs)
	err = p.awaitLinks()
	p.acc.close()
	var me *meshError
	if errors.As(err, &me) {
		// Rank 0 relays the reason to everyone; dialers still running
		// give up at `late` and their connections are closed then.
		c0 := p.conns[0]
		c0.SetWriteDeadline(time.Now().Add(time.Second))
		WriteMsg(c0, tcpMsgAbort, []byte("rendezvous: "+me.Error()))
		return fmt.Errorf("rendezvous: %w", me.err)
	}
	if err != nil {
		return err
	}
	return p.reportReady()
}

// release stops the listener, the acceptor and the dials still running
// (which close their connections), success or not.
func (p *peerRendezvous) release() {
	close(p.quit)
	if p.acc != nil {
		p.acc.close()
	}
	p.ln.Close()
}

// closeConns drops every link after a failure.
func (p *peerRendezvous) closeConns() {
	for _, c := range p.conns {
		if c != nil {
			c.Close()
		}
	}
}

// joinRoot dials rank 0, retrying until deadline, and announces where this
// rank's mesh listener is.
func (p *peerRendezvous) joinRoot(deadline time.Time) error {
	port := 0 // a star has no mesh listener
	if p.ln != nil {
		port = p.ln.Addr().(*net.TCPAddr).Port
	}
	join := func(local net.Addr) []byte {
		return append(joinRecord(port, local), nameRecord(p.o.backendName())...)
	}
	c0, err := dialPeer(p.o, p.hostport, 0, p.o.purpose(), join, deadline)
	if err != nil {
		return rootDialError(p.o, p.hostport, err)
	}
	p.conns[0] = c0
	p.late = time.Now().Add(p.o.RendezvousTimeout + rendezvousGrace)
	return nil
}

// rootDialError says why rank 0 could not be joined: a setup error when
// retrying cannot help. A name that does not resolve is said as rank 0
// says it (see checkMasterAddr).
func rootDialError(o *Options, hostport string, err error) error {
	if de := notFound(err); de != nil {
		return &backend.SetupError{Err: fmt.Errorf("rendezvous: %w", &masterAddrError{Addr: o.MasterAddr, Err: de})}
	}
	if badAddress(err) {
		return &backend.SetupError{Err: fmt.Errorf("rendezvous: MASTER_ADDR %q: %w", o.MasterAddr, err)}
	}
	var ae *authError
	if errors.As(err, &ae) {
		return &backend.SetupError{Err: fmt.Errorf("rendezvous at %s: %w", hostport, err)}
	}
	return fmt.Errorf("rendezvous: could not reach rank 0 at %s within %v: %w", hostport, o.RendezvousTimeout, err)
}

// fromRoot reads rank 0's next message, which must be of type want (or
// an abort, which is returned as the error).
func (p *peerRendezvous) fromRoot(want byte) ([]byte, error) {
	c0 := p.conns[0]
	c0.SetReadDeadline(p.late)
	typ, body, err := ReadMsg(c0, p.o.Size*joinLen+1<<16)
	switch {
	case err != nil:
		return nil, fmt.Errorf("rendezvous: lost rank 0 at %s: %w", p.hostport, err)
	case typ == tcpMsgAbort:
		return nil, fmt.Errorf("rendezvous failed (reported by rank 0): %s", body)
	case typ != want:
		return nil, fmt.Errorf("rendezvous: rank 0 sent message type %d, expected %d", typ, want)
	}
	return body, nil
}

// readTable waits for rank 0's table: every rank's mesh address.
func (p *peerRendezvous) readTable() ([]string, error) {
	table, err := p.fromRoot(tcpMsgTable)
	if err != nil {
		return nil, err
	}
	return tableAddrs(table, p.o.Size)
}

// startMesh starts accepting the lower ranks, dialing the higher ones and
// listening to rank 0 for its verdict.
func (p *peerRendezvous) startMesh(addrs []string) {
	p.acc = startAcceptor(p.ln, p.o, purposeMesh, 0, p.late)
	if TestHookMeshListener != nil {
		TestHookMeshListener(p.o.Rank, p.ln.Addr())
	}
	for r := p.o.Rank + 1; r < p.o.Size; r++ {
		if p.isLink[r] {
			go p.dial(r, addrs[r])
		}
	}
	go func() {
		_, err := p.fromRoot(tcpMsgReady)
		p.verdict <- err
	}()
}

// dial connects to rank r's mesh listener and hands the link to
// awaitLinks, or closes it once the rendezvous is over.
func (p *peerRendezvous) dial(r int, addr string) {
	// Its listener is up already: retry briefly, then tell rank 0 why.
	c, err := dialPeer(p.o, addr, r, purposeMesh, nil, earlier(p.late, time.Now().Add(meshDialTimeout)))
	if err != nil {
		err = fmt.Errorf("rank %d cannot connect to rank %d at %s: %w", p.o.Rank, r, addr, err)
	}
	select {
	case p.dials <- meshDial{r, c, err}:
	case <-p.quit:
		if c != nil {
			c.Close()
		}
	}
}

// awaitLinks waits until this rank has its links to every rank it links to
// but 0. Its own failures are *meshError; rank 0's verdict ends it early
// too.
func (p *peerRendezvous) awaitLinks() error {
	timer := time.NewTimer(time.Until(p.late))
	defer timer.Stop()
	need := 0
	for r := 1; r < p.o.Size; r++ {
		if p.isLink[r] {
			need++
		}
	}
	for need > 0 {
		select {
		case h := <-p.acc.out:
			linked, err := p.admit(h)
			if err != nil {
				return &meshError{err}
			}
			if linked {
				need--
			}
		case d := <-p.dials:
			if d.err != nil {
				return &meshError{d.err}
			}
			p.conns[d.rank] = d.c
			need--
		case err := <-p.verdict:
			if err == nil {
				err = errors.New("rendezvous: rank 0 declared the mesh ready before this rank's links were up")
			}
			return err
		case <-timer.C:
			return &meshError{p.missingLinks()}
		}
	}
	return nil
}

// admit takes in a lower rank's mesh link, or refuses it (a link it has
// already, say): linked reports which.
func (p *peerRendezvous) admit(h *peerHello) (linked bool, err error) {
	r := int(h.rank)
	reason := checkPeer(&h.hello, p.o, purposeMesh)
	switch {
	case reason != "":
	case r >= p.o.Rank || !p.isLink[r]:
		reason = fmt.Sprintf("rank %d takes no link from rank %d", p.o.Rank, r)
	case p.conns[r] != nil:
		reason = fmt.Sprintf("rank %d already has a link from rank %d", p.o.Rank, r)
	}
	if reason != "" {
		p.o.Logf("collective: rank %d refused a connection from %s: %s", p.o.Rank, h.conn.RemoteAddr(), reason)
		refuse(h.conn, reason)
		return false, nil
	}
	h.conn.SetWriteDeadline(p.late)
	if err := WriteMsg(h.conn, tcpMsgAccept, nil); err != nil {
		h.conn.Close()
		return false, fmt.Errorf("rank %d: accepting rank %d: %w", p.o.Rank, r, err)
	}
	h.conn.SetDeadline(time.Time{})
	p.conns[r] = h.conn
	return true, nil
}

// missingLinks names the ranks this one has no link to yet.
func (p *peerRendezvous) missingLinks() error {
	var missing []string
	for r := 1; r < p.o.Size; r++ {
		if p.isLink[r] && p.conns[r] == nil {
			missing = append(missing, strconv.Itoa(r))
		}
	}
	return fmt.Errorf("rank %d: no link to ranks %s after %v", p.o.Rank, strings.Join(missing, ", "), p.o.RendezvousTimeout)
}

// reportReady tells rank 0 this rank's links are up and waits for its
// verdict on everyone's.
func (p *peerRendezvous) reportReady() error {
	c0 := p.conns[0]
	c0.SetWriteDeadline(p.late)
	if err := WriteMsg(c0, tcpMsgMeshOK, nil); err != nil {
		return fmt.Errorf("rendezvous: lost rank 0 at %s: %w", p.hostport, err)
	}
	if err := <-p.verdict; err != nil {
		return err
	}
	if !p.isLink[0] { // rank 0 closes its end too
		p.conns[0].Close()
		p.conns[0] = nil
	}
	for _, c := range p.conns {
		if c != nil {
			c.SetDeadline(time.Time{})
		}
	}
	return nil
}
