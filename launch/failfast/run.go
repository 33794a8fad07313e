package failfast

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/batchkit/batchkit/launch"
)

// input is an event for the main loop, with the connection it came on
// when it is a peer (or the hub) joining.
type input struct {
	ev   Event
	conn net.Conn
}

// watcher is Run's edge state; only Run's loop touches it.
type watcher struct {
	cfg    Config
	st     *State
	cmd    *exec.Cmd
	stderr io.Writer
	events chan input
	done   chan struct{} // closed when Run returns: goroutines stop sending
	conns  map[int]net.Conn
	ln     net.Listener
	kill   <-chan time.Time // the grace period's end
	linger *time.Timer      // a peer's last wait to join, its child gone
	start  time.Time        // when Run began: the hub's join closes JoinTimeout later
	exited time.Time        // when the child exited: a peer's linger ends ExitWait later
	status int              // the child's exit status, once it exited
	say    <-chan time.Time // when to say why it waits (sayWait); nil: not armed
	waited bool             // the wait for unjoined ranks was armed or said (WaitLine)
}

// Run runs cmd as this rank's program, watched: see the package comment.
// cmd gets a process group of its own, which signals from sigs and a stop
// reach whole (a shell's children too). The code is the child's status
// (128+S for signal S), or the failing rank's when this one was stopped;
// err is non-nil only when the child could not be started (the others
// are stopped then too, and code is 127 or 126). Problems with
// the watch itself are printed to stderr and leave the child running
// unwatched: fail-fast must never be the reason a job fails.
func Run(ctx context.Context, cfg Config, cmd *exec.Cmd, sigs <-chan os.Signal, stderr io.Writer) (int, error) {
	w := &watcher{cfg: cfg, st: NewState(cfg.Rank, cfg.Size), cmd: cmd, stderr: stderr,
		events: make(chan input, 16), done: make(chan struct{}), conns: map[int]net.Conn{}, start: time.Now()}
	defer w.close()
	if cfg.Rank == 0 {
		// Listen before the child starts, so that no port the child picks
		// can take ours and the peers find the hub as early as possible.
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(cfg.Port))
		if err != nil {
			w.warn("cannot listen for the other ranks: %v", err)
			w.st.Step(Event{Kind: JoinClosed})
		} else {
			w.ln = ln
			go w.acceptLoop()
		}
		// A peer that has not joined by then is not waited for.
		time.AfterFunc(cfg.JoinTimeout, func() { w.send(input{ev: Event{Kind: JoinClosed}}) })
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var startErr error
	if err := cmd.Start(); err != nil {
		// Not started (not found, say) is a failure the others must hear of.
		se := launch.Started(err).(*launch.StartError)
		startErr = se
		w.events <- input{ev: Event{Kind: ChildExited, Status: se.Code}}
	} else {
		go func() {
			code, _ := launch.WaitStatus(cmd.Wait())
			w.send(input{ev: Event{Kind: ChildExited, Status: code}})
		}()
	}
	if cfg.Rank != 0 {
		go w.dialLoop(ctx)
	}
	return w.loop(ctx, sigs), startErr
}

// loop feeds events to the state machine and carries out its actions.
func (w *watcher) loop(ctx context.Context, sigs <-chan os.Signal) int {
	ctxDone := ctx.Done()
	for {
		select {
		case in := <-w.events:
			if in.conn != nil {
				w.conns[in.ev.Rank] = in.conn
			}
			if in.ev.Kind == ChildExited {
				w.status, w.exited = in.ev.Status, time.Now()
			}
			if code, exit := w.do(w.st.Step(in.ev)); exit {
				return code
			}
			w.lingerOnce()
			w.armSay()
		case <-w.say:
			w.say = nil
			w.sayWait()
		case s := <-sigs:
			w.signal(launch.Signal(s))
			if code, exit := w.do(w.st.Step(Event{Kind: Interrupted})); exit {
				return code
			}
		case <-ctxDone:
			ctxDone = nil
			w.stopChild()
			if code, exit := w.do(w.st.Step(Event{Kind: Interrupted})); exit {
				return code
			}
		case <-w.kill:
			w.signal(syscall.SIGKILL)
		}
	}
}

// do carries out acts; exit is true with the code to exit with.
func (w *watcher) do(acts []Action) (code int, exit bool) {
	for _, a := range acts {
		switch a.Kind {
		case Report:
			typ := byte(msgDone)
			if a.Status != 0 {
				typ = msgFail
			}
			w.write(0, frame{typ, int32(w.cfg.Rank), int32(a.Status)})
		case Tell:
			f := w.st.Failure
			w.write(a.Rank, frame{msgStop, int32(f.Rank), int32(f.Status)})
		case Announce:
			if w.ln != nil || w.conns[0] != nil { // no one to stop otherwise
				fmt.Fprintln(w.stderr, w.st.Failure.Line(true))
			}
		case KillChild:
			fmt.Fprintln(w.stderr, w.st.Failure.Line(false))
			w.stopChild()
		case Exit:
			return a.Status, true
		}
	}
	return 0, false
}

// lingerOnce bounds a peer's wait to join the hub once its child has
// exited (ExitWait), so that a hub that never listened delays no exit by
// the whole JoinTimeout.
func (w *watcher) lingerOnce() {
	if w.cfg.Rank != 0 && w.st.Phase == Draining && w.linger == nil {
		w.linger = time.AfterFunc(w.cfg.ExitWait, func() { w.send(input{ev: Event{Kind: JoinClosed}}) })
	}
}

// SayDelay is how long a wrapper whose child has exited waits for ranks
// that have not joined (State.Unjoined) before it says why it waits: a
// rank that joins a moment late is no news.
const SayDelay = time.Second

// armSay starts SayDelay once the wait for unjoined ranks begins.
func (w *watcher) armSay() {
	if !w.waited && len(w.st.Unjoined()) > 0 {
		w.waited = true
		w.say = time.After(SayDelay)
	}
}

// sayWait prints why the wrapper still waits, if it does: rank 0 for the
// rest of the time to join, a peer for the rest of ExitWait.
func (w *watcher) sayWait() {
	unjoined := w.st.Unjoined()
	if len(unjoined) == 0 {
		return
	}
	end := w.exited.Add(w.cfg.ExitWait)
	if w.cfg.Rank == 0 {
		end = w.start.Add(w.cfg.JoinTimeout)
	}
	wait := max(time.Until(end), 0).Round(time.Second)
	addr := net.JoinHostPort(w.cfg.Addr, strconv.Itoa(w.cfg.Port))
	fmt.Fprintln(w.stderr, WaitLine(w.cfg.Rank, w.status, unjoined, wait, addr))
}

// stopChild sends SIGTERM now and SIGKILL after the grace period.
func (w *watcher) stopChild() {
	w.signal(syscall.SIGTERM)
	if w.kill == nil {
		w.kill = time.After(w.cfg.Grace)
	}
}

// signal signals the child's process group.
func (w *watcher) signal(s syscall.Signal) {
	if w.cmd.Process != nil { // nil: never started
		_ = syscall.Kill(-w.cmd.Process.Pid, s)
	}
}

func (w *watcher) write(rank int, f frame) {
	if c := w.conns[rank]; c != nil {
		c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
		_ = writeFrame(c, f) // a peer gone is reported by its reader
	}
}

func (w *watcher) warn(format string, a ...any) {
	fmt.Fprintf(w.stderr, "batchkit exec: rank %d: fail-fast off: %s\n", w.cfg.Rank, fmt.Sprintf(format, a...))
}

// send hands in to the loop, unless Run has returned.
func (w *watcher) send(in input) {
	select {
	case w.events <- in:
	case <-w.done:
	}
}

func (w *watcher) close() {
	close(w.done)
	if w.linger != nil {
		w.linger.Stop()
	}
	if w.ln != nil {
		w.ln.Close()
	}
	for _, c := range w.conns {
		c.Close()
	}
}

// acceptLoop admits the peers (the hub's side).
func (w *watcher) acceptLoop() {
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return // closed by Run
		}
		go func() {
			rank, err := accept(c, w.cfg.Token, w.cfg.Size)
			if err != nil {
				fmt.Fprintf(w.stderr, "batchkit exec: rank 0: refused a connection from %s: %v\n", c.RemoteAddr(), err)
				c.Close()
				return
			}
			w.send(input{ev: Event{Kind: PeerJoined, Rank: rank}, conn: c})
			w.readLoop(c, rank)
		}()
	}
}

// dialLoop joins the hub (a peer's side), retrying until JoinTimeout: the
// hub may not listen yet. A wrong token gives up at once.
func (w *watcher) dialLoop(ctx context.Context) {
	addr := net.JoinHostPort(w.cfg.Addr, strconv.Itoa(w.cfg.Port))
	deadline := time.Now().Add(w.cfg.JoinTimeout)
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		c, err := net.DialTimeout("tcp", addr, handshakeTimeout)
		if err == nil {
			if err = dial(c, w.cfg.Token, w.cfg.Rank, w.cfg.Size); err == nil {
				w.send(input{ev: Event{Kind: PeerJoined, Rank: 0}, conn: c})
				w.readLoop(c, 0)
				return
			}
			c.Close()
		}
		if errors.Is(err, ErrRefused) || time.Now().After(deadline) || ctx.Err() != nil {
			w.warn("cannot join rank 0's watcher at %s: %v", addr, err)
			w.send(input{ev: Event{Kind: JoinClosed}})
			return
		}
		select {
		case <-time.After(wait):
		case <-w.done:
			return
		}
	}
}

// readLoop turns a connection's frames into events, and its end into
// PeerLost.
func (w *watcher) readLoop(c net.Conn, from int) {
	for {
		f, err := readFrame(c)
		if err != nil {
			w.send(input{ev: Event{Kind: PeerLost, Rank: from}})
			return
		}
		if ev, ok := f.event(from, w.cfg.Rank == 0); ok {
			w.send(input{ev: ev})
		}
	}
}
