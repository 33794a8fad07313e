// Package launch holds the rules batchkit's three ways of starting ranks
// share. Each of them is a package below this one with the same shape:
//
//   - launch/local: batchkit's own launcher, N ranks on this machine;
//   - launch/mpilaunch: an MPI launcher (or srun) on the hosts of a job;
//   - launch/sbatch: a batch script submitted to Slurm.
//
// Each has a pure Plan function (its inputs in; the argv, environment and
// files to write out, decided but not started), table-tested, and one
//
//	Run(ctx, plan, IO, signals) (code int, err error)
//
// that does the side effects, under the same rules:
//
//   - Signals: no package here calls signal.Notify (a library does not
//     take over the process's signals). The program's edge catches Signals
//     once and hands them to Run, which forwards each to what it started.
//     Cancelling ctx stops what was started as a SIGTERM would, and Run
//     then returns ctx's error.
//   - Exit codes: code is what the program should exit with: the started
//     program's status, 128+S when signal S killed it (as shells report
//     it). err is non-nil only when the launcher itself failed, and code
//     then says how: 2 for bad input (errors.Is(err, ErrInvalid)), 127 for
//     a program not found, 126 for one that cannot be run, 1 otherwise
//     (StartCode).
package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"unsafe"
)

// Signals are the signals the program's edge catches and every Run
// forwards: SIGINT and SIGTERM to stop; SIGHUP, the terminal or ssh
// session closed; SIGQUIT, the user wants the ranks' own dumps, not the
// launcher's; SIGUSR1, Slurm's warning before a time limit (sbatch
// --signal), which batchkit train answers with a checkpoint and exit 75.
var Signals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1}

// IO is what a started program reads and writes. A nil Stdin is
// /dev/null; nil writers discard.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// ErrInvalid marks bad input to a Plan or a Run, found before anything
// started: exit 2.
var ErrInvalid = errors.New("invalid input")

// Invalid is an error in the input: errors.Is(err, ErrInvalid) holds, and
// the message is just the problem.
func Invalid(format string, a ...any) error {
	return &invalidError{fmt.Errorf(format, a...)}
}

// Bad marks err as caused by the input (nil stays nil); its message and
// chain are kept.
func Bad(err error) error {
	if err == nil {
		return nil
	}
	return &invalidError{err}
}

type invalidError struct{ err error }

func (e *invalidError) Error() string   { return e.err.Error() }
func (e *invalidError) Unwrap() error   { return e.err }
func (e *invalidError) Is(t error) bool { return t == ErrInvalid }

// StartError is a program that could not be started; Code is StartCode's.
type StartError struct {
	Code int
	Err  error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// Started is nil for a nil err, else err as a StartError, its exec.Error
// wrapper taken off ("name: not found", not exec's `exec: "name": ...`).
func Started(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		err = fmt.Errorf("%s: %w", ee.Name, ee.Err)
	}
	return &StartError{Code: StartCode(err), Err: err}
}

// StartCode is the exit code for a program that could not be looked up or
// started, as bash reports it: 127 not found; 126 found but not something
// to run (no permission, a directory, no #! line, arguments too long, being
// written); 1 for anything else, which is the launcher's own failure (out
// of processes or memory, say).
func StartCode(err error) int {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return 127
	case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOEXEC),
		errors.Is(err, syscall.E2BIG), errors.Is(err, syscall.ETXTBSY):
		return 126
	}
	return 1
}

// ExecHint says what to do about a program the kernel would not run
// (ENOEXEC): most often a script without a #! line, which a shell would
// run itself but exec(2) does not. "" for other errors.
func ExecHint(err error) string {
	if errors.Is(err, syscall.ENOEXEC) {
		return " (a script needs a first line naming its interpreter, such as #!/bin/sh)"
	}
	return ""
}

// ExitStatus is a finished process's status as a shell reports it: the
// exit code, or 128+S when killed by signal S.
func ExitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// WaitStatus is ExitStatus from exec.Cmd.Wait's error: 0 for nil, the
// status for an exit or a signal, and 1 with the error when waiting
// itself failed.
func WaitStatus(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ExitStatus(ee.ProcessState), nil
	}
	return 1, err
}

// Signal is s as a syscall.Signal; a signal of another kind (none on
// Unix) counts as SIGTERM.
func Signal(s os.Signal) syscall.Signal {
	if sig, ok := s.(syscall.Signal); ok {
		return sig
	}
	return syscall.SIGTERM
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS",
	syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2",
}

// SignalName is "SIGTERM" for SIGTERM, "signal N" for one without a name here.
func SignalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}

// terminalKeys are the signals a terminal sends its foreground process
// group when a key is pressed (Ctrl-C, Ctrl-\).
var terminalKeys = map[os.Signal]bool{syscall.SIGINT: true, syscall.SIGQUIT: true}

// FromTerminal reports whether s, sent to this process, also reached a
// child in this process group by itself: a key's signal while stdin is a
// terminal whose foreground group is ours. Forwarding it would deliver it
// twice, and Open MPI's mpirun takes a second Ctrl-C as "kill now".
func FromTerminal(s os.Signal, stdin io.Reader) bool {
	if !terminalKeys[s] {
		return false
	}
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
