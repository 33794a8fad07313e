package local

import (
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/batchkit/batchkit/launch"
)

// rank is one started rank.
type rank struct {
	id      int
	cmd     *exec.Cmd
	pgid    int
	readers []*os.File // read ends of its stdout and stderr pipes
	writers []*lineWriter
}

// exitEvent is how a rank ended.
type exitEvent struct {
	rank   int
	code   int            // its status as a shell reports it (launch.ExitStatus)
	exit   int            // its exit code, -1 when killed
	signal syscall.Signal // the signal that killed it, 0 if it exited
}

// exitOf reads the event from a finished rank's state.
func exitOf(id int, ps *os.ProcessState) exitEvent {
	ev := exitEvent{rank: id, code: launch.ExitStatus(ps), exit: ps.ExitCode()}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ev.signal = ws.Signal()
	}
	return ev
}

// start starts rank id and the goroutines that copy its output; its exit
// is sent to exits once its output is in.
func (r *runner) start(id int, exits chan<- exitEvent, copied *sync.WaitGroup) error {
	t := RankTopology(id, r.N, r.port)
	if err := t.Validate(); err != nil {
		return err
	}
	rk := &rank{id: id}
	var tee io.Writer
	if r.tees != nil {
		tee = r.tees[id]
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	rk.readers = []*os.File{outR, errR}
	rk.writers = []*lineWriter{
		newLineWriter(&r.mu, r.io.Stdout, Prefix(id, r.ColorStdout), tee),
		newLineWriter(&r.mu, r.io.Stderr, Prefix(id, r.ColorStderr), tee),
	}
	rk.cmd = &exec.Cmd{
		Path:        r.path,
		Args:        r.Argv,
		Env:         rankEnv(r.env, r.Profile, t, r.envAttempt()),
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: sysProcAttr(),
	}
	err = rk.cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return err
	}
	rk.pgid = rk.cmd.Process.Pid
	r.ranks = append(r.ranks, rk)
	rk.copyOutput(exits, copied)
	return nil
}

// copyOutput drains the rank's pipes and, when it has exited, reports it.
func (rk *rank) copyOutput(exits chan<- exitEvent, copied *sync.WaitGroup) {
	var drains sync.WaitGroup
	for i := range rk.readers {
		copied.Add(1)
		drains.Add(1)
		go func() {
			defer copied.Done()
			defer drains.Done()
			drain(rk.readers[i], rk.writers[i])
		}()
	}
	drained := make(chan struct{})
	go func() {
		drains.Wait()
		close(drained)
	}()
	go func() {
		rk.cmd.Wait() //nolint:errcheck // the status is in ProcessState
		// The rank's last words (why it failed) come before the launcher's
		// line about its exit; a process it left behind may hold the pipes
		// open, so the wait is short.
		select {
		case <-drained:
		case <-time.After(exitDrainWait):
		}
		exits <- exitOf(rk.id, rk.cmd.ProcessState)
	}()
}

// exitDrainWait bounds how long a rank's exit is held back for its output.
const exitDrainWait = 200 * time.Millisecond

// drain copies a pipe into w until EOF or until the pipe is closed under it.
func drain(f *os.File, w *lineWriter) {
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			w.Write(buf[:n]) //nolint:errcheck // never fails
		}
		if err != nil {
			break
		}
	}
	w.Flush()
}
