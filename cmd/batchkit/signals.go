package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/trainer"
)

// The program's edge is the one place batchkit catches signals: for the
// launchers (catchSignals) and for train (stopOnSignals).

// catchSignals takes launch.Signals over while a launcher runs, so that
// they reach the channel every launcher's Run forwards from instead of
// stopping batchkit; stop hands them back.
func catchSignals() (sigs <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 4)
	signal.Notify(c, launch.Signals...)
	return c, func() { signal.Stop(c) }
}

// launchExit is batchkit's exit after a launcher's Run, the same for the
// three (package launch's rules): bad input exits 2; the launcher's own
// failure prints err and exits code; else code is the launched program's,
// passed through without a message.
func launchExit(code int, err error) error {
	switch {
	case errors.Is(err, launch.ErrInvalid):
		return badInput(err)
	case err != nil:
		if code == 0 {
			code = exitFailure
		}
		return cli.Exit(err.Error(), code)
	case code != 0:
		return &childExit{code}
	}
	return nil
}

// stopOnSignals turns SIGUSR1 and SIGTERM into the loop's stop request, at
// the edge: the library installs no handler. SIGUSR1 asks for a
// trainer.Preempt, SIGTERM for a trainer.Cancel, which stays once asked:
// a cancelled job's ranks can get both (Slurm's SIGTERM, then the batch
// script's SIGUSR1). It is called before the rendezvous, so that a signal
// Slurm sends while the ranks start up is kept for the first step (it
// would otherwise kill the rank, and the job would end without a
// checkpoint). A second SIGTERM ends the rank at once, by that signal: the
// way out of a rank that hangs (a rendezvous that never completes) — one
// at least secondTermAfter after the first: Slurm, the launcher and batchkit
// exec can each pass the same cancel on (four SIGTERMs within 0.1 s were
// seen under MPICH's Hydra), and those copies must not cost the checkpoint.
// SIGUSR1 never ends it: with scancel --full a rank gets it from Slurm and
// again from the batch shell. The returned undo stops reacting to them.
func stopOnSignals(errw io.Writer) (stop func() trainer.StopReason, undo func()) {
	var requested atomic.Uint32
	sigs := make(chan os.Signal, 4)
	done := make(chan struct{})
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGUSR1)
	go func() {
		var firstTerm time.Time
		for {
			select {
			case s := <-sigs:
				if s != syscall.SIGTERM {
					requested.CompareAndSwap(uint32(trainer.NoStop), uint32(trainer.Preempt))
					continue
				}
				requested.Store(uint32(trainer.Cancel))
				if firstTerm.IsZero() {
					firstTerm = time.Now()
				} else if time.Since(firstTerm) >= secondTermAfter {
					fmt.Fprintln(errw, "batchkit: second SIGTERM: stopping now, without a checkpoint")
					signal.Reset(syscall.SIGTERM)
					syscall.Kill(os.Getpid(), syscall.SIGTERM)
				}
			case <-done:
				return
			}
		}
	}()
	// undo ends the goroutine but leaves the signals caught: it runs when
	// train's action returns, before Main prints its error, and a SIGTERM
	// then (the launcher stopping the ranks, as another rank failed the
	// same check) must not kill the rank before it says why it failed.
	return func() trainer.StopReason { return trainer.StopReason(requested.Load()) },
		func() { close(done) }
}

// secondTermAfter is how long after the first SIGTERM a second one ends a
// rank at once; one sooner is a copy of the first.
const secondTermAfter = 500 * time.Millisecond
