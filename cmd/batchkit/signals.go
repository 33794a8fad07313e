package main

import (
	"errors"
	"os"
	"os/signal"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/launch"
)

// catchSignals takes launch.Signals over while a launcher runs, so that
// they reach the channel every launcher's Run forwards from instead of
// stopping batchkit. This, the program's edge, is the one place batchkit
// catches signals; stop hands them back.
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
