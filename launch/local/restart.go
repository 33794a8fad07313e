package local

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/launch"
)

// Restarts (Options.MaxRestarts, torchrun's --max-restarts): when a rank
// fails, the launcher stops the others as usual and then starts all ranks
// again, as a fresh world. Whether to restart is decided by Decide from how
// the attempt ended; runAttempts is the loop around whole attempts.

// ExitPreempted is the exit status of a rank that stopped on purpose and can
// be run again later: EX_TEMPFAIL of sysexits.h, which batchkit train exits
// with when it was preempted after writing a checkpoint. Restarting at once
// would undo the stop, so it is never restarted.
const ExitPreempted = 75

// ExitUsage is the exit status of a usage error (bad flags or input): the
// same command would fail the same way, so it is never restarted.
const ExitUsage = 2

// ExitDiverged is train's exit when the loss became NaN or infinite: the
// same command from the same checkpoint diverges again at the same step.
const ExitDiverged = 65

// Outcome is how one attempt ended, as far as restarting is concerned.
type Outcome struct {
	// Code is what the launcher would exit with after this attempt.
	Code int
	// Rank is the first rank that failed, -1 when none did. It is the
	// cause: the ranks failing after it were stopped by the launcher or
	// lost their peer.
	Rank int
	// Exit is that rank's exit code, Signal the signal that killed it
	// (0 if it exited).
	Exit   int
	Signal syscall.Signal
	// Stopped: the user stopped the run (a forwarded signal, or the
	// context was cancelled). A stop asked for is never undone by a restart.
	Stopped bool
	// LaunchErr: the launcher itself failed (a rank could not be started),
	// which a restart would repeat.
	LaunchErr bool
}

// outcome is an attempt's Outcome from its first failing rank (nil if
// none) and the first signal forwarded to the ranks (0 if none). Code is
// that rank's status (128+S if killed by signal S), else 128+launchSig
// after a forwarded signal, else 0.
func outcome(failed *exitEvent, launchSig syscall.Signal) Outcome {
	o := Outcome{Rank: -1, Stopped: launchSig != 0}
	if launchSig != 0 {
		o.Code = 128 + int(launchSig)
	}
	if failed != nil {
		o.Code, o.Rank, o.Exit, o.Signal = failed.code, failed.rank, failed.exit, failed.signal
	}
	return o
}

// DefaultRestartBackoff is the wait before the first restart; each next
// one waits twice as long as the one before, up to MaxRestartBackoff. A
// rank that fails at start would otherwise be restarted thousands of times
// a second (2,282 in 10 s), using up the restarts before whatever it lacks
// (a file system, a peer, a licence server) is back.
const (
	DefaultRestartBackoff = time.Second
	MaxRestartBackoff     = 30 * time.Second
)

// Backoff is the wait before restart n (1 for the first) when the first
// waits base: base, 2×base, 4×base ... at most MaxRestartBackoff.
func Backoff(base time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < MaxRestartBackoff; i++ {
		d *= 2
	}
	return min(d, MaxRestartBackoff)
}

// Decision is what follows an attempt.
type Decision struct {
	Restart bool
	Wait    time.Duration // before the restart
	// Say is the launcher's line about it ("" for nothing): the restart,
	// or why a failure is not restarted when restarts were asked for.
	Say string
}

// Decide says whether to restart after an attempt that ended with o, when
// restarts have been made already and max are allowed. The rule: restart
// when the first failing rank exited non-zero or was killed by a signal,
// except for a stop the user asked for, a launcher error, exit 75
// (ExitPreempted: a deliberate stop), exit 2 (ExitUsage) and exit 65
// (ExitDiverged), which would fail again identically. torchrun restarts on
// any failure; these three exits are
// the ones where that is known to be pointless or wrong. A restart waits
// Backoff(base, its number) first.
func Decide(o Outcome, restarts, max int, base time.Duration) Decision {
	if o.Rank < 0 || o.Stopped || o.LaunchErr || max == 0 {
		return Decision{}
	}
	what := fmt.Sprintf("rank %d failed (exit code %d)", o.Rank, o.Exit)
	if o.Signal != 0 {
		what = fmt.Sprintf("rank %d died (signal %d)", o.Rank, int(o.Signal))
	}
	switch {
	case o.Signal == 0 && o.Exit == ExitPreempted:
		return Decision{Say: what + ": it stopped on purpose (75: preempted, rerun later); not restarting"}
	case o.Signal == 0 && o.Exit == ExitUsage:
		return Decision{Say: what + ": a usage error would fail again; not restarting"}
	case o.Signal == 0 && o.Exit == ExitDiverged:
		return Decision{Say: what + ": the training diverged and would diverge again at the same step; not restarting"}
	case restarts >= max:
		return Decision{Say: fmt.Sprintf("%s; no restarts left (%d of %d done)", what, restarts, max)}
	}
	wait := Backoff(base, restarts+1)
	return Decision{Restart: true, Wait: wait, Say: fmt.Sprintf("%s; restart %d of %d in %s", what, restarts+1, max, wait)}
}

// runAttempts runs attempts until Decide stops; each restart is a fresh
// world (newWorld). The result is the last attempt's.
func (r *runner) runAttempts(ctx context.Context) (int, error) {
	for {
		o, err := r.run(ctx)
		if err != nil {
			o.LaunchErr = true
		}
		d := Decide(o, r.restart, r.MaxRestarts, r.restartBackoff())
		if d.Say != "" {
			r.printf("%s", d.Say)
		}
		if !d.Restart {
			return o.Code, err
		}
		if err := r.backOff(ctx, d.Wait); errors.Is(err, errStopped) {
			return o.Code, nil
		} else if err != nil {
			return o.Code, err
		}
		if err := r.newWorld(); err != nil {
			return 1, err
		}
	}
}

func (r *runner) restartBackoff() time.Duration {
	if r.RestartBackoff == 0 {
		return DefaultRestartBackoff
	}
	return r.RestartBackoff
}

// backOff waits d before a restart. A signal meanwhile is a stop the user
// asks for, as during an attempt: no restart (nil error, the failed
// attempt's code stands); a cancelled ctx returns its error.
func (r *runner) backOff(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case s := <-r.sigs:
		r.printf("got %s while waiting to restart; not restarting", launch.SignalName(launch.Signal(s)))
		return errStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errStopped is a stop asked for between attempts; runAttempts returns the
// failed attempt's code without an error.
var errStopped = errors.New("stopped")

// newWorld prepares the next attempt: a new MASTER_PORT (unless the user
// chose one) and a new job token, so that a straggler of the old world can
// never join the new one, and the next restart count.
func (r *runner) newWorld() error {
	r.restart++
	r.ranks = nil
	var err error
	if r.token, err = envsetup.NewToken(); err != nil {
		return err
	}
	if r.MasterPort == 0 {
		old := r.port
		// The kernel may hand out the same free port again; ask a few
		// times for another.
		for range 10 {
			if r.port, err = freePort(); err != nil || r.port != old {
				return err
			}
		}
	}
	return nil
}
