package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/trainer/collective"
)

// initComm joins the world for bench and train. A setup that cannot work
// (no MPI in this build, ranks that disagree, a bad MASTER_ADDR, no token)
// is the user's to fix: exit 2. Refused connections and links kept off
// shared memory are worth a line on stderr: the first is someone else's job
// (or an attack), the second a slower run than expected. On the cgo
// backends the process is set up for them here, at the program's edge
// (collective.SetupProcess: GOMAXPROCS, SIGABRT).
func initComm(c *cli.Context, cfg collective.Config) (*collective.Comm, error) {
	cfg.Logf = func(format string, a ...any) { fmt.Fprintf(c.App.ErrWriter, "batchkit: "+format+"\n", a...) }
	comm, err := collective.Init(cfg)
	if err == nil {
		collective.SetupProcess(comm, cfg.Getenv)
	}
	var (
		tokenErr *collective.TokenError
		worldErr *collective.WorldError
		setupErr *collective.SetupError
	)
	if errors.Is(err, collective.ErrNoMPI) || errors.Is(err, collective.ErrNoCCL) || errors.As(err, &tokenErr) || errors.As(err, &worldErr) || errors.As(err, &setupErr) {
		return nil, badInput(err)
	}
	return comm, err
}
