package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/batchkit/batchkit/internal/cmdgroup"
)

// ExecRunner is the one place doctor runs a program: scontrol ping,
// mpirun --version, the Python probe. None of them has a reason to print
// much, to run long or to leave anything behind, and one that does must
// not take doctor with it:
//
//   - c runs in its own process group, and the whole group is killed when
//     ctx is done: a wrapper script's sleeping child dies with it;
//   - of each of stdout and stderr the first MaxOutput bytes are kept; a
//     program printing more is stopped there (its group killed) and fails
//     with ErrTooMuchOutput, so that `yes` costs a MiB and milliseconds,
//     not gigabytes and the whole timeout;
//   - the output ends when the program has exited and every process
//     holding the pipes has closed them. A process it left behind that
//     still holds them HeldDelay after it exited is killed with the group,
//     and the command fails with ErrOutputHeld: Wait does not hang on it,
//     and the verdict names the command's misbehaviour rather than, say, a
//     controller that does not answer.
func ExecRunner(ctx context.Context, c Command) (stdout, stderr string, err error) {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env = c.Env // nil: this process's
	cmdgroup.Bound(cmd, HeldDelay)
	// Pipes of doctor's own, not os/exec's: their end is observed here,
	// whatever the program's exit status, instead of through Wait.
	outs := [2]*capture{{name: "stdout"}, {name: "stderr"}}
	var ws [2]*os.File
	for i, o := range outs {
		if o.r, ws[i], err = os.Pipe(); err != nil {
			closeAll(outs[:i], ws[:i])
			return "", "", err
		}
	}
	cmd.Stdout, cmd.Stderr = ws[0], ws[1]
	err = cmd.Start()
	closeAll(nil, ws[:]) // the child has its copies
	if err != nil {
		closeAll(outs[:], nil)
		return "", "", err
	}
	var wg sync.WaitGroup
	for _, o := range outs {
		wg.Go(func() { o.read(func() { stop(&OutputError{Stream: o.name}) }) })
	}
	err = cmd.Wait()
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	held := false
	timer := time.NewTimer(HeldDelay)
	defer timer.Stop()
	select {
	case <-ended:
	case <-timer.C:
		// The group outlives its leader while a member lives (the holder,
		// a moment ago), and Linux does not reuse its id meanwhile. The
		// pipes are closed too, for a holder that left the group.
		held = true
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		closeAll(outs[:], nil)
		<-ended
	}
	closeAll(outs[:], nil)
	stdout, stderr = string(outs[0].kept), string(outs[1].kept)
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrTooMuchOutput):
		return stdout, stderr, cause // not the "signal: killed" it was stopped with
	case ctx.Err() != nil:
		return stdout, stderr, err // the caller's deadline: a timeout
	case held:
		return stdout, stderr, &HeldError{Exit: err}
	}
	return stdout, stderr, err
}

// MaxOutput is what doctor keeps of each of a command's stdout and stderr,
// and what the command may print on either: 1 MiB, which no version line,
// ping or probe comes near.
const MaxOutput = 1 << 20

// HeldDelay is how long doctor waits, once a command has exited, for the
// processes it left behind to close its output.
const HeldDelay = 500 * time.Millisecond

// ErrTooMuchOutput is a command stopped for printing more than MaxOutput
// bytes on stdout or stderr.
var ErrTooMuchOutput = errors.New("too much output")

// OutputError is the ErrTooMuchOutput of one stream.
type OutputError struct{ Stream string }

func (e *OutputError) Error() string {
	return fmt.Sprintf("printed more than %s on %s: stopped", size(MaxOutput), e.Stream)
}

func (e *OutputError) Is(target error) bool { return target == ErrTooMuchOutput }

func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ErrOutputHeld is a command that exited while a process it started kept
// its stdout or stderr open.
var ErrOutputHeld = errors.New("output held")

// HeldError is the ErrOutputHeld of one command: its exit status, and the
// process it left behind, which doctor killed.
type HeldError struct {
	Exit error // nil: it exited 0
}

func (e *HeldError) Error() string {
	const held = "a process it left behind held its output open (killed)"
	if e.Exit == nil {
		return "exited, but " + held
	}
	return e.Exit.Error() + ", and " + held
}

func (e *HeldError) Is(target error) bool { return target == ErrOutputHeld }

func (e *HeldError) Unwrap() error { return e.Exit }

// misbehaved: the command itself, not what it asks, is the problem.
func misbehaved(err error) bool {
	return errors.Is(err, ErrTooMuchOutput) || errors.Is(err, ErrOutputHeld)
}

// capture reads one of a command's outputs, keeping MaxOutput bytes.
type capture struct {
	name string
	r    *os.File
	kept []byte
}

// read reads to the end (EOF, or r closed), calling tooMuch once when
// more than MaxOutput bytes came; the rest is read and dropped until the
// command is gone.
func (c *capture) read(tooMuch func()) {
	buf := make([]byte, 32<<10)
	over := false
	for {
		n, err := c.r.Read(buf)
		if room := MaxOutput - len(c.kept); n > room && !over {
			over = true
			tooMuch()
		}
		c.kept = append(c.kept, buf[:min(n, MaxOutput-len(c.kept))]...)
		if err != nil {
			return
		}
	}
}

func closeAll(cs []*capture, ws []*os.File) {
	for _, c := range cs {
		c.r.Close()
	}
	for _, w := range ws {
		w.Close()
	}
}
