package local

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/batchkit/batchkit/launch"
)

// An attempt starts every rank, then waits for them and for what they left
// in their process groups. Its state is a phase and a few facts; each
// event of the wait (a rank exited, a signal came, ctx was cancelled, the
// grace period ended, the process groups were polled) is a named step.

// phase is how far stopping the ranks has gone.
type phase int

const (
	running  phase = iota // nothing sent
	stopping              // a signal went out; SIGKILL when the grace period ends
	killed                // SIGKILL went out
)

// attempt is one attempt's state.
type attempt struct {
	r        *runner
	exits    chan exitEvent
	copied   sync.WaitGroup // the goroutines copying the ranks' output
	running  int            // ranks started and not yet exited
	phase    phase
	termSent bool             // SIGTERM went out: what is left ignores no more
	grace    <-chan time.Time // during stopping: SIGKILL when it fires
	killedAt time.Time
	failed   *exitEvent     // the first rank that exited non-zero
	stopSig  syscall.Signal // the first signal forwarded, 0 if none
	ctxErr   error          // ctx's error once it was cancelled
}

func newAttempt(r *runner) *attempt {
	return &attempt{r: r, exits: make(chan exitEvent, r.N)}
}

// run runs one attempt: it starts every rank and waits for all of them.
func (r *runner) run(ctx context.Context) (Outcome, error) {
	a := newAttempt(r)
	if code, err := a.startAll(); err != nil {
		return Outcome{Code: code, Rank: -1}, err
	}
	a.wait(ctx)
	a.finishOutput()
	r.reportTeeErrors()
	return outcome(a.failed, a.stopSig), a.ctxErr
}

// startAll starts the ranks. When one cannot be started, those started
// already are stopped and waited for, and the code says why (StartCode).
func (a *attempt) startAll() (int, error) {
	for id := range a.r.N {
		err := a.r.start(id, a.exits, &a.copied)
		if err == nil {
			a.running++
			continue
		}
		code := launch.StartCode(err)
		err = fmt.Errorf("starting rank %d: %w%s", id, err, launch.ExecHint(err))
		if a.running > 0 {
			a.r.printf("%v; stopping %s", err, plural(a.running, "other rank"))
			a.stopAndWait()
		}
		return code, err
	}
	return 0, nil
}

// wait takes the attempt's events until every rank has exited and their
// process groups are empty.
func (a *attempt) wait(ctx context.Context) {
	ctxDone := ctx.Done()
	var poll <-chan time.Time
	for {
		if a.running == 0 {
			if a.groupsGone() {
				return
			}
			poll = time.After(20 * time.Millisecond)
		}
		select {
		case ev := <-a.exits:
			a.exited(ev)
		case s := <-a.r.sigs:
			a.forward(launch.Signal(s))
		case <-ctxDone:
			ctxDone, a.ctxErr = nil, ctx.Err()
			a.forward(syscall.SIGTERM)
		case <-a.grace:
			a.kill()
		case <-poll:
		}
	}
}

// exited is the step for a rank's exit: the first failure, unless the
// ranks are being stopped already, is announced and stops the others.
func (a *attempt) exited(ev exitEvent) {
	a.running--
	if ev.code == 0 || a.failed != nil {
		return
	}
	a.failed = &ev
	if a.phase != running {
		return
	}
	msg := fmt.Sprintf("rank %d exited with code %d", ev.rank, ev.code)
	if ev.signal != 0 {
		msg = fmt.Sprintf("rank %d was killed by %s (code %d)", ev.rank, launch.SignalName(ev.signal), ev.code)
	}
	if a.running > 0 {
		msg += "; stopping " + plural(a.running, "other rank")
	}
	a.r.printf("%s", msg)
	a.stop(syscall.SIGTERM)
}

// forward is the step for a signal to pass on to every rank; the first
// is announced and decides the code when every rank still exits 0.
func (a *attempt) forward(sig syscall.Signal) {
	if a.stopSig == 0 {
		a.stopSig = sig
		if a.running > 0 {
			a.r.printf("got %s; forwarding it to %s", launch.SignalName(sig), plural(a.running, "rank"))
		}
	}
	a.stop(sig)
}

// stop sends sig to every rank's group; the first stop starts the grace
// period.
func (a *attempt) stop(sig syscall.Signal) {
	a.r.signalAll(sig)
	a.termSent = a.termSent || sig == syscall.SIGTERM
	if a.phase == running {
		a.phase = stopping
		a.grace = time.After(a.r.Grace)
	}
}

// kill is the step for the end of the grace period.
func (a *attempt) kill() {
	a.r.signalAll(syscall.SIGKILL)
	a.phase, a.killedAt, a.grace = killed, time.Now(), nil
}

// survivorWait is how long processes may survive SIGKILL before the
// launcher gives up on them (unkillable: in uninterruptible sleep).
const survivorWait = 5 * time.Second

// groupsGone is the step once every rank has exited: it reports whether
// their process groups are empty, stopping what is left in them (SIGTERM,
// as a forwarded SIGINT, say, may be ignored by it: background jobs of sh
// ignore it), or giving up on what survived SIGKILL.
func (a *attempt) groupsGone() bool {
	live := liveGroups(a.r.pgids())
	if len(live) == 0 {
		return true
	}
	if !a.termSent && a.phase != killed {
		a.stop(syscall.SIGTERM)
	}
	if a.phase == killed && time.Since(a.killedAt) > survivorWait {
		a.r.printf("processes of process groups %v survived SIGKILL", keys(live))
		return true
	}
	return false
}

// stopAndWait stops the ranks started so far after a failure to start
// another, and waits for them and their process groups.
func (a *attempt) stopAndWait() {
	r := a.r
	r.signalAll(syscall.SIGTERM)
	deadline := time.After(r.Grace)
	for n := a.running; n > 0; {
		select {
		case <-a.exits:
			n--
		case <-deadline:
			r.signalAll(syscall.SIGKILL)
			deadline = nil
		}
	}
	end := time.Now().Add(r.Grace)
	for len(liveGroups(r.pgids())) > 0 && time.Now().Before(end) {
		time.Sleep(20 * time.Millisecond)
	}
	r.signalAll(syscall.SIGKILL)
	a.finishOutput()
}

// finishOutput waits for the output goroutines, which end when every holder
// of a pipe's write end has exited. A process outside the ranks' process
// groups (one that called setsid, say) could hold a pipe open for ever, so
// after a short wait the read ends are closed under the readers.
func (a *attempt) finishOutput() {
	done := make(chan struct{})
	go func() { a.copied.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		a.r.closeReaders()
		<-done
	}
	a.r.closeReaders()
}

func (r *runner) closeReaders() {
	for _, rk := range r.ranks {
		for _, f := range rk.readers {
			f.Close()
		}
	}
}

// reportTeeErrors says which rank's log could not be written, once a rank.
func (r *runner) reportTeeErrors() {
	for _, rk := range r.ranks {
		for _, w := range rk.writers {
			if w.teeErr != nil {
				r.printf("--tee: rank %d: %v", rk.id, w.teeErr)
				break
			}
		}
	}
}
