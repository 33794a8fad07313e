package rendezvous

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// A star is the rendezvous alone, for a backend whose data moves over
// another library (ccl): every rank authenticates to rank 0 with the job
// token exactly as the TCP backend's ranks do, rank 0 hands every rank a
// payload (oneCCL's KVS address), every rank runs its step with it (joins
// the library's communicator), and the verdict is all or none, as for the
// TCP mesh. The connections stay open afterwards as the job's watchdog:
// rank 0 sees any rank die (its connection closes without a goodbye) and
// tells the others which, and every rank sees rank 0 die.
//
// Ranks given different backends meet at the same MASTER_PORT: rank 0
// refuses the other backend's ranks naming both (checkBackend).

// starSpec is what JoinStar adds to Options.
type starSpec struct {
	backend string
	payload func() ([]byte, error)     // rank 0's, once every rank has joined
	step    func(payload []byte) error // every rank's, rank 0's included
}

// The watchdog's messages, after the rendezvous.
const (
	tcpMsgBye  = 16 + iota // this rank closes its communicator: its EOF is no death
	tcpMsgLost             // rank 0 → all: body uint32 rank + why
)

// maxPayload bounds rank 0's payload.
const maxPayload = 1 << 16

// Star is one rank's end of a star: rank 0 holds a connection to every
// rank, the others one to rank 0.
type Star struct {
	o      Options
	conns  []*net.TCPConn
	mu     sync.Mutex
	closed bool
	bye    []bool // rank 0: the ranks that said goodbye
	lost   error  // the first loss seen
	onLost func(*LostError)
	wg     sync.WaitGroup
}

// LostError: a rank of the job died (or closed its connection without
// closing its communicator) while this one still needed it.
type LostError struct {
	Rank int
	Addr string // its address, as rank 0 saw it; "" when unknown
	Why  string
}

func (e *LostError) Error() string {
	where := ""
	if e.Addr != "" {
		where = " at " + e.Addr
	}
	return fmt.Sprintf("rank %d%s left the job: %s", e.Rank, where, e.Why)
}

// JoinStar meets at MASTER_ADDR:MASTER_PORT under backendName. Rank 0 calls
// payload once every rank has joined and sends its result to every rank;
// every rank (rank 0 too, concurrently) then calls step with it. JoinStar
// returns on every rank once every step has succeeded, or an error on
// every rank naming the first failure. A world of one runs payload and
// step locally.
func JoinStar(opts Options, backendName string, payload func() ([]byte, error), step func([]byte) error) (*Star, error) {
	if len(backendName) > nameLen {
		return nil, fmt.Errorf("backend name %q longer than %d bytes", backendName, nameLen)
	}
	o, err := opts.WithDefaults()
	if err != nil {
		return nil, err
	}
	o.star = &starSpec{backend: backendName, payload: payload, step: step}
	s := &Star{o: o}
	if o.Size == 1 {
		p, err := payload()
		if err == nil {
			err = step(p)
		}
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if s.conns, err = Connect(&s.o); err != nil {
		return nil, err
	}
	s.bye = make([]bool, o.Size)
	return s, nil
}

// runStar is rank 0's side: gather, the payload to everyone, every step
// (rank 0's own concurrently with the others' reports), ready.
func (r *rootRendezvous) runStar() error {
	if err := r.gather(); err != nil {
		return err
	}
	r.acc.close()
	payload, err := r.o.star.payload()
	if err != nil {
		return fmt.Errorf("rank 0: %w", err)
	}
	if len(payload) > maxPayload {
		return fmt.Errorf("rank 0: payload of %d bytes", len(payload))
	}
	err = r.sendAll(tcpMsgTable, payload, func(rank int, err error) string {
		return fmt.Sprintf("rendezvous: sending rank %d the %s address: %v", rank, r.o.star.backend, err)
	})
	if err != nil {
		return err
	}
	// Rank 0's step may wait for every rank's (a library's communicator
	// forms on all ranks at once): it runs beside the reports, and a rank
	// that fails its step fails the rendezvous even while rank 0's waits.
	own := make(chan error, 1)
	go func() { own <- r.o.star.step(payload) }()
	if err := r.awaitMeshReports(); err != nil {
		return err
	}
	select {
	case err := <-own:
		if err != nil {
			return fmt.Errorf("rank 0: %w", err)
		}
	case <-time.After(time.Until(r.deadline)):
		return fmt.Errorf("rendezvous: rank 0 did not join the %s communicator within %v although every other rank did", r.o.star.backend, r.o.RendezvousTimeout)
	}
	err = r.sendAll(tcpMsgReady, nil, func(rank int, err error) string {
		return fmt.Sprintf("rendezvous: rank %d left: %v", rank, err)
	})
	if err != nil {
		return err
	}
	for _, c := range r.conns[1:] {
		c.SetDeadline(time.Time{})
	}
	return nil
}

// starPeer is the side of every other rank: join, the payload, the step
// (its failure reported to rank 0, which tells everyone), the verdict.
func starPeer(o *Options, deadline time.Time) ([]*net.TCPConn, error) {
	p := &peerRendezvous{o: o, hostport: o.masterHostPort(), conns: make([]*net.TCPConn, o.Size)}
	if err := p.joinRoot(deadline); err != nil {
		return nil, err
	}
	c0 := p.conns[0]
	fail := func(err error) ([]*net.TCPConn, error) {
		c0.Close()
		return nil, err
	}
	payload, err := p.fromRoot(tcpMsgTable)
	if err != nil {
		return fail(err)
	}
	// The step runs while rank 0's verdict may arrive: a rank that failed
	// its step elsewhere makes rank 0 abort, and this rank's step may be
	// waiting for that rank.
	verdict := make(chan error, 1)
	step := make(chan error, 1)
	go func() { step <- o.star.step(payload) }()
	go func() {
		_, err := p.fromRoot(tcpMsgReady)
		verdict <- err
	}()
	select {
	case err := <-step:
		if err != nil {
			c0.SetWriteDeadline(time.Now().Add(time.Second))
			WriteMsg(c0, tcpMsgAbort, []byte(fmt.Sprintf("rank %d: %v", o.Rank, err)))
			return fail(fmt.Errorf("rank %d: %w", o.Rank, err))
		}
	case err := <-verdict:
		if err == nil {
			err = errors.New("rendezvous: rank 0 declared the world ready before this rank had joined the communicator")
		}
		return fail(err)
	case <-time.After(time.Until(p.late)):
		return fail(fmt.Errorf("rendezvous: rank %d did not join the %s communicator within %v", o.Rank, o.star.backend, o.RendezvousTimeout))
	}
	c0.SetWriteDeadline(p.late)
	if err := WriteMsg(c0, tcpMsgMeshOK, nil); err != nil {
		return fail(fmt.Errorf("rendezvous: lost rank 0 at %s: %w", p.hostport, err))
	}
	if err := <-verdict; err != nil {
		return fail(err)
	}
	c0.SetDeadline(time.Time{})
	return p.conns, nil
}

// Watch starts the watchdog: lost is called once, from another goroutine,
// with the first rank lost. Call it once, after JoinStar.
func (s *Star) Watch(lost func(*LostError)) {
	s.onLost = lost
	for r, c := range s.conns {
		if c == nil {
			continue
		}
		s.wg.Add(1)
		go s.watch(r, c)
	}
}

// watch reads one connection until it closes: rank 0 reads every rank's,
// the others rank 0's.
func (s *Star) watch(rank int, c *net.TCPConn) {
	defer s.wg.Done()
	for {
		typ, body, err := ReadMsg(c, maxPayload)
		switch {
		case err != nil:
			s.mu.Lock()
			quiet := s.closed || s.bye[rank]
			s.mu.Unlock()
			if !quiet {
				s.lose(&LostError{Rank: rank, Addr: c.RemoteAddr().String(), Why: "its connection to rank " + fmt.Sprint(s.o.Rank) + " closed without a goodbye: it died or was killed (" + err.Error() + ")"})
			}
			return
		case typ == tcpMsgBye:
			s.mu.Lock()
			s.bye[rank] = true
			s.mu.Unlock()
		case typ == tcpMsgLost && len(body) >= 4:
			s.lose(&LostError{Rank: int(binary.LittleEndian.Uint32(body)), Why: string(body[4:]) + " (reported by rank 0)"})
		}
	}
}

// lose records the first loss, tells the other ranks (rank 0) and the
// backend.
func (s *Star) lose(e *LostError) {
	s.mu.Lock()
	if s.lost != nil || s.closed {
		s.mu.Unlock()
		return
	}
	s.lost = e
	s.mu.Unlock()
	if s.o.Rank == 0 {
		why := e.Why
		if e.Addr != "" {
			why = "at " + e.Addr + ": " + why
		}
		body := binary.LittleEndian.AppendUint32(nil, uint32(e.Rank))
		body = append(body, why...)
		for r, c := range s.conns {
			if c != nil && r != e.Rank {
				c.SetWriteDeadline(time.Now().Add(time.Second))
				WriteMsg(c, tcpMsgLost, body)
			}
		}
	}
	if s.onLost != nil {
		s.onLost(e)
	}
}

// Lost is the first rank lost, nil while every rank is there.
func (s *Star) Lost() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		return nil
	}
	return s.lost
}

// Close says goodbye to the ranks this one is connected to and closes the
// connections. Idempotent.
func (s *Star) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	for _, c := range s.conns {
		if c != nil {
			c.SetWriteDeadline(time.Now().Add(time.Second))
			WriteMsg(c, tcpMsgBye, nil)
			c.CloseWrite()
		}
	}
	for _, c := range s.conns {
		if c != nil {
			c.Close()
		}
	}
	s.wg.Wait()
	return nil
}
