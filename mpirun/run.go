package mpirun

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"unsafe"
)

// StartError is a launcher that could not be started; Code follows the
// shell's convention: 127 not found, 126 not executable.
type StartError struct {
	Code int
	Err  error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// Run runs argv to completion and returns its exit status, 128+N when a
// signal N killed it (as a shell reports it). SIGINT and SIGTERM sent to
// this process are forwarded to the launcher, which then takes its ranks
// down in its own way. The launcher stays in this process group so it can
// read a terminal; a SIGINT that arrives while this process group owns the
// terminal came from the terminal's Ctrl-C, which the launcher received
// itself, so it is not sent a second time (Open MPI's mpirun takes a second
// Ctrl-C as "kill now").
//
// env is the launcher's environment (nil: this process's). It is where the
// values of Spec.ForwardEnv come from, so a secret handed to the ranks goes
// there, never into argv, which every user of the machine can read.
func Run(argv, env []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		code := 127
		if errors.Is(err, os.ErrPermission) {
			code = 126
		}
		return code, &StartError{code, err}
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr

	sigs := make(chan os.Signal, 4)
	// SIGUSR1 too: Slurm's warning before a time limit, which mpirun
	// forwards to the ranks (batchkit train checkpoints and exits 75).
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		code := 126
		if errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return code, &StartError{code, err}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGINT && terminalForeground(stdin) {
				continue
			}
			_ = cmd.Process.Signal(s)
		case err := <-done:
			return exitStatus(err)
		}
	}
}

func exitStatus(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 1, err
}

// terminalForeground reports whether stdin is a terminal whose foreground
// process group is this process's group: then the terminal's own signals
// reach the launcher directly.
func terminalForeground(stdin io.Reader) bool {
	f, ok := stdin.(*os.File)
	if !ok {
		return false
	}
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return false
	}
	return int(pgrp) == syscall.Getpgrp()
}
