package launch

import (
	"context"
	"os"
	"os/exec"
	"syscall"
)

// RunChild starts cmd and waits for it, under the package's rules: a
// signal from sigs is forwarded to it (unless FromTerminal: it got that
// one itself), and cancelling ctx sends it SIGTERM and makes the error
// ctx's. cmd stays in this process group, so that it can read a terminal.
// Launchers that start one program (mpirun, sbatch) run it with this.
func RunChild(ctx context.Context, cmd *exec.Cmd, sigs <-chan os.Signal) (int, error) {
	if err := cmd.Start(); err != nil {
		se := Started(err).(*StartError)
		return se.Code, se
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctxDone := ctx.Done()
	for {
		select {
		case s := <-sigs:
			if !FromTerminal(s, cmd.Stdin) {
				signalLauncher(cmd.Process, s)
			}
		case <-ctxDone:
			ctxDone = nil
			signalLauncher(cmd.Process, syscall.SIGTERM)
		case err := <-done:
			code, err := WaitStatus(err)
			if err == nil && ctx.Err() != nil {
				// Stopped as asked; a clean exit still says so, as
				// launch/local's does after a forwarded SIGTERM.
				if code == 0 {
					code = 128 + int(syscall.SIGTERM)
				}
				err = ctx.Err()
			}
			return code, err
		}
	}
}
