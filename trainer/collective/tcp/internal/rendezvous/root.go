package rendezvous

import (
	"errors"
	"fmt"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"net"
	"strconv"
	"time"
)

// rootRendezvous is rank 0's side of the rendezvous, in the order run takes
// its steps: gather (every rank joins and says where its mesh listener is),
// sendTable, awaitMeshReports (every rank's links are up), sendReady, then
// it keeps only the connections that are links. A step that fails returns
// the reason; run's caller then aborts, telling every joined rank that
// reason, in one place.
type rootRendezvous struct {
	o        *Options
	isLink   []bool // by rank: a connection kept after the rendezvous
	deadline time.Time
	hostport string
	acc      *acceptor
	conns    []*net.TCPConn // by rank, once joined; nil at 0
	joins    [][]byte       // by rank: the join record (see joinRecord)
	joined   int            // non-nil conns
}

func rendezvousRoot(o *Options, isLink []bool, deadline time.Time) ([]*net.TCPConn, error) {
	if err := checkRootAddr(o, deadline); err != nil {
		return nil, err
	}
	r, err := listenRoot(o, deadline)
	if err != nil {
		return nil, err
	}
	r.isLink = isLink
	defer r.acc.close()
	if err := r.run(); err != nil {
		r.abort(err.Error())
		return nil, err
	}
	return r.conns, nil
}

// listenRoot opens rank 0's listener at MASTER_PORT and starts accepting.
func listenRoot(o *Options, deadline time.Time) (*rootRendezvous, error) {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(o.MasterPort))
	if err != nil {
		return nil, &backend.SetupError{Err: fmt.Errorf("rendezvous: rank 0 cannot listen on port %d: %w (another job or service may hold it: set MASTER_PORT to a free port)", o.MasterPort, err)}
	}
	return &rootRendezvous{
		o: o, deadline: deadline, hostport: o.masterHostPort(),
		acc:   startAcceptor(l.(*net.TCPListener), o, o.purpose(), joinLen+nameLen, deadline),
		conns: make([]*net.TCPConn, o.Size),
		joins: make([][]byte, o.Size),
	}, nil
}

func (r *rootRendezvous) run() error {
	if r.o.star != nil {
		return r.runStar()
	}
	if err := r.gather(); err != nil {
		return err
	}
	r.acc.close() // every rank is in: no more joins
	table := joinTable(r.joins)
	err := r.sendAll(tcpMsgTable, table, func(rank int, err error) string {
		return fmt.Sprintf("rendezvous: sending the address table to rank %d: %v", rank, err)
	})
	if err != nil {
		return err
	}
	if err := r.awaitMeshReports(); err != nil {
		return err
	}
	err = r.sendAll(tcpMsgReady, nil, func(rank int, err error) string {
		return fmt.Sprintf("rendezvous: rank %d left: %v", rank, err)
	})
	if err != nil {
		return err
	}
	r.keepLinks()
	return nil
}

// keepLinks closes the connections of the ranks that rank 0 does not link
// to (they close theirs too once they have read ready) and lifts the
// deadlines of the others.
func (r *rootRendezvous) keepLinks() {
	for rank, c := range r.conns {
		switch {
		case c == nil:
		case r.isLink[rank]:
			c.SetDeadline(time.Time{})
		default:
			c.Close()
			r.conns[rank] = nil
		}
	}
}

// abort tells every joined rank why the rendezvous failed, and closes
// their connections.
func (r *rootRendezvous) abort(reason string) {
	for _, c := range r.conns {
		if c != nil {
			refuse(c, reason)
		}
	}
}

// gather waits until every rank has joined.
func (r *rootRendezvous) gather() error {
	timer := time.NewTimer(time.Until(r.deadline))
	defer timer.Stop()
	for r.joined < r.o.Size-1 {
		select {
		case p := <-r.acc.out:
			if err := r.admit(p); err != nil {
				return err
			}
		case <-timer.C:
			return r.timedOut("never connected", func(rank int) bool { return r.conns[rank] == nil })
		}
	}
	return nil
}

// admit takes in an authenticated rank. A rank that does not fit the
// world fails the rendezvous (a *SetupError); one that leaves before it is
// accepted is dropped (it may retry).
func (r *rootRendezvous) admit(p *peerHello) error {
	rank := int(p.rank)
	reason := checkBackend(p, r.o)
	if reason == "" {
		reason = checkPeer(&p.hello, r.o, r.o.purpose())
	}
	if reason != "" {
		refuse(p.conn, reason)
		return &backend.SetupError{Err: errors.New("rendezvous: " + reason)}
	}
	if c := r.conns[rank]; c != nil && gone(c) { // it gave up on us and retried
		c.Close()
		r.conns[rank] = nil
		r.joined--
	}
	if c := r.conns[rank]; c != nil {
		reason := fmt.Sprintf("rendezvous: rank %d joined twice, from %s and from %s: two processes were given the same rank",
			rank, c.RemoteAddr(), p.conn.RemoteAddr())
		refuse(p.conn, reason)
		return &backend.SetupError{Err: errors.New(reason)}
	}
	p.conn.SetWriteDeadline(r.deadline)
	if err := WriteMsg(p.conn, tcpMsgAccept, nil); err != nil {
		r.o.Logf("collective: rank %d at %s left during the rendezvous: %v", rank, p.conn.RemoteAddr(), err)
		p.conn.Close()
		return nil
	}
	r.conns[rank], r.joins[rank] = p.conn, p.extra
	r.joined++
	return nil
}

// sendAll sends one message to every other rank; failed(rank, err) is the
// reason the rendezvous fails when a rank cannot be reached.
func (r *rootRendezvous) sendAll(typ byte, body []byte, failed func(rank int, err error) string) error {
	for rank := 1; rank < r.o.Size; rank++ {
		r.conns[rank].SetWriteDeadline(r.deadline)
		if err := WriteMsg(r.conns[rank], typ, body); err != nil {
			return errors.New(failed(rank, err))
		}
	}
	return nil
}

// meshReport is what a rank sent rank 0 about its mesh links.
type meshReport struct {
	rank int
	typ  byte
	body []byte
	err  error
}

// awaitMeshReports waits for every rank to report its mesh links up.
func (r *rootRendezvous) awaitMeshReports() error {
	reports := make(chan meshReport, r.o.Size)
	for rank := 1; rank < r.o.Size; rank++ {
		c := r.conns[rank]
		c.SetReadDeadline(r.deadline)
		go func() {
			typ, body, err := ReadMsg(c, 1<<16)
			reports <- meshReport{rank, typ, body, err}
		}()
	}
	timer := time.NewTimer(time.Until(r.deadline))
	defer timer.Stop()
	done := make([]bool, r.o.Size)
	for n := 1; n < r.o.Size; n++ {
		select {
		case rep := <-reports:
			if err := rep.check(); err != nil {
				return err
			}
			done[rep.rank] = true
		case <-timer.C:
			return r.timedOut("did not finish connecting to their peers", func(rank int) bool { return !done[rank] })
		}
	}
	return nil
}

// check is nil for a rank whose links are up, else the reason to fail.
func (rep meshReport) check() error {
	switch {
	case rep.err != nil:
		return fmt.Errorf("rendezvous: rank %d left while building the mesh: %v", rep.rank, rep.err)
	case rep.typ == tcpMsgAbort:
		return errors.New(string(rep.body))
	case rep.typ != tcpMsgMeshOK:
		return fmt.Errorf("rendezvous: rank %d sent message type %d while building the mesh", rep.rank, rep.typ)
	}
	return nil
}

// timedOut is the rendezvous timing out with the ranks for which pending
// holds doing what they have not done yet.
func (r *rootRendezvous) timedOut(what string, pending func(rank int) bool) error {
	var missing []int
	for rank := 1; rank < r.o.Size; rank++ {
		if pending(rank) {
			missing = append(missing, rank)
		}
	}
	return errors.New(timeoutReason(r.hostport, r.o.RendezvousTimeout, missing, r.o.Size, what, r.acc.refusedCount()))
}

// timeoutReason says which ranks did not do what in time, and how many
// connections were refused meanwhile (a hint at a wrong token).
func timeoutReason(hostport string, timeout time.Duration, missing []int, size int, what string, refused int) string {
	msg := fmt.Sprintf("rendezvous at %s timed out after %v: %s %s", hostport, timeout, rankList(missing, size), what)
	if refused > 0 {
		msg += fmt.Sprintf(" (%d connection(s) refused meanwhile: a wrong job token, or not a batchkit rank; see the log)", refused)
	}
	return msg
}
