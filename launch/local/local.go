// Package local is batchkit's own launcher for one machine: it starts N ranks
// of a command with the torchrun contract set (RANK, WORLD_SIZE, MASTER_ADDR
// ...), prefixes their output with the rank, forwards signals, and when one
// rank fails stops the others, leaving no process behind.
//
// The pure parts — each rank's environment (RankTopology, rankEnv) and the
// line prefixing — are separate from the process management in Run.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/batchkit/batchkit/envsetup"
)

// DefaultGrace is how long stopped ranks get between SIGTERM and SIGKILL.
const DefaultGrace = 5 * time.Second

// ErrInvalid marks an error in Options, found before any rank started.
var ErrInvalid = errors.New("invalid options")

// Options configure a run.
type Options struct {
	N    int      // number of ranks, at least 1
	Cmd  string   // the program, looked up on PATH like a shell does
	Args []string // its arguments
	// Env is the environment each rank inherits, os.Environ-style; nil means
	// os.Environ(). The torchrun contract and BATCHKIT_JOB_TOKEN are set on
	// top. A non-empty BATCHKIT_JOB_TOKEN in Env is kept for the first
	// attempt; every restart gets a fresh one (see MaxRestarts).
	Env []string

	// Stdout and Stderr receive the ranks' stdout and stderr, each line
	// prefixed "[RANK] ". Launcher messages go to Stderr. nil discards.
	Stdout, Stderr io.Writer
	// ColorStdout and ColorStderr colour the prefixes on that stream.
	ColorStdout, ColorStderr bool

	// TeeDir, if set, also gets each rank's stdout and stderr, unprefixed, in
	// TeeDir/rank-N.log. It is created if needed; existing logs are never
	// overwritten (Run fails with ErrInvalid).
	TeeDir string

	// Grace is the time between SIGTERM and SIGKILL when ranks are stopped:
	// after a rank failed, after a forwarded signal, and for processes left
	// in a rank's process group when the rank exits. 0 kills at once.
	Grace time.Duration

	// Profile is a site profile's layers over Env for every rank; Env is
	// then the environment from before its scripts were sourced.
	Profile Profile

	// MasterPort is MASTER_PORT; 0 picks a free port on 127.0.0.1.
	MasterPort int

	// Signals are forwarded to every rank's process group (typically SIGINT
	// and SIGTERM from signal.Notify). nil forwards nothing.
	Signals <-chan os.Signal

	// MaxRestarts is how many times all ranks are started again after a
	// rank failed (see Decide for which failures count), each time with a
	// new MASTER_PORT (unless MasterPort is set) and a new job token.
	MaxRestarts int
}

// Run starts opts.N ranks of opts.Cmd and waits until all have exited and no
// process is left in their process groups.
//
// Each rank runs in a process group of its own; signals go to the whole
// group, so they reach what the rank started too. Processes still in a
// rank's group when every rank has exited get SIGTERM, then SIGKILL after
// opts.Grace; a process that left the group (setsid) is out of reach. On
// Linux a rank also gets SIGKILL if the launcher dies. The ranks' stdin is
// /dev/null.
//
// When a rank exits non-zero or is killed, Run prints one line naming it to
// Stderr and stops the others: SIGTERM, then SIGKILL after opts.Grace. A
// signal from opts.Signals is forwarded to every rank, followed by SIGKILL
// after opts.Grace if they are still running. Cancelling ctx stops the ranks
// like a SIGTERM would and makes Run return ctx's error.
//
// exitCode is what the launcher should exit with:
//   - 0 when every rank succeeded;
//   - the first failing rank's status, where a rank killed by signal S
//     counts as 128+S, as shells report it;
//   - after a forwarded signal S, 128+S if every rank still exited 0.
//
// err is non-nil only if the launcher itself failed; exitCode is then 2 for
// invalid options (errors.Is(err, ErrInvalid)), 127 when Cmd is not found,
// 126 when it cannot be executed, and 1 otherwise.
//
// With opts.MaxRestarts, a failed attempt may be followed by another, after
// every rank of the old one and its process group are gone; the result is
// the last attempt's.
func Run(ctx context.Context, opts Options) (exitCode int, err error) {
	r, code, err := prepare(opts)
	if err != nil {
		return code, err
	}
	defer r.closeTees()
	return r.runAttempts(ctx)
}

// rank is one started rank.
type rank struct {
	id      int
	cmd     *exec.Cmd
	pgid    int
	readers []*os.File // read ends of its stdout and stderr pipes
	writers []*lineWriter
	tee     *os.File
}

type exitEvent struct {
	rank int
	ps   *os.ProcessState
}

type launch struct {
	opts    Options
	path    string
	env     []string // base environment
	port    int      // this attempt's MASTER_PORT
	token   string   // this attempt's job token
	runID   string   // envvars.RunID: one per launch, the same in every attempt
	restart int      // restarts so far: this attempt's envvars.RestartCount
	tees    []*os.File

	mu    sync.Mutex // serialises all output lines
	ranks []*rank
}

// invalid is an error in Options: errors.Is(err, ErrInvalid) holds, and the
// message is just the problem.
func invalid(format string, a ...any) error {
	return &invalidError{fmt.Sprintf(format, a...)}
}

type invalidError struct{ msg string }

func (e *invalidError) Error() string   { return e.msg }
func (e *invalidError) Is(t error) bool { return t == ErrInvalid }

// prepare checks opts and resolves everything a run needs before any rank
// starts.
func prepare(o Options) (*launch, int, error) {
	switch {
	case o.N < 1:
		return nil, 2, invalid("need at least 1 rank, got %d", o.N)
	case o.Cmd == "":
		return nil, 2, invalid("no command given")
	case o.Grace < 0:
		return nil, 2, invalid("grace period %v is negative", o.Grace)
	case o.MasterPort < 0 || o.MasterPort > 65535:
		return nil, 2, invalid("master port %d out of range 1-65535", o.MasterPort)
	case o.MaxRestarts < 0:
		return nil, 2, invalid("max restarts %d is negative", o.MaxRestarts)
	}
	path, err := exec.LookPath(o.Cmd)
	if err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) {
			err = fmt.Errorf("%s: %w", ee.Name, ee.Err) // not exec's "exec: \"name\": ..."
		}
		if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EISDIR) {
			return nil, 126, err // found, but not something to run (bash says the same)
		}
		return nil, 127, err
	}
	l := &launch{opts: o, path: path, env: o.Env, port: o.MasterPort,
		runID: fmt.Sprintf("batchkit-run-%d-%d", os.Getpid(), time.Now().UnixNano())}
	if l.env == nil {
		l.env = os.Environ()
	}
	if l.token, err = envsetup.LaunchToken(l.env, envsetup.NewToken); err != nil {
		return nil, 1, err
	}
	if l.port == 0 {
		if l.port, err = freePort(); err != nil {
			return nil, 1, err
		}
	}
	if o.TeeDir != "" {
		if l.tees, err = openTees(o.TeeDir, o.N); err != nil {
			return nil, 2, err
		}
	}
	return l, 0, nil
}

// openTees creates dir and dir/rank-N.log for every rank, refusing to
// overwrite any existing log.
func openTees(dir string, n int) ([]*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, invalid("--tee: %v", err)
	}
	for i := range n {
		p := teePath(dir, i)
		if _, err := os.Lstat(p); err == nil {
			return nil, invalid("--tee: %s exists; remove the old logs or choose another directory", p)
		}
	}
	var files []*os.File
	for i := range n {
		f, err := os.OpenFile(teePath(dir, i), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			for _, f := range files { // ours, and empty
				f.Close()
				os.Remove(f.Name())
			}
			if errors.Is(err, os.ErrExist) {
				return nil, invalid("--tee: %s exists; remove the old logs or choose another directory", teePath(dir, i))
			}
			return nil, invalid("--tee: %v", err)
		}
		files = append(files, f)
	}
	return files, nil
}

func teePath(dir string, rank int) string {
	return filepath.Join(dir, "rank-"+strconv.Itoa(rank)+".log")
}

func (l *launch) closeTees() {
	for _, f := range l.tees {
		f.Close()
	}
}

// printf writes one launcher message line to Stderr.
func (l *launch) printf(format string, a ...any) {
	if l.opts.Stderr == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.opts.Stderr, "batchkit: "+format+"\n", a...)
}

// start starts rank id and the goroutines that copy its output.
func (l *launch) start(id int, exits chan<- exitEvent, copied *sync.WaitGroup) error {
	t := RankTopology(id, l.opts.N, l.port)
	if err := t.Validate(); err != nil {
		return err
	}
	r := &rank{id: id}
	if l.tees != nil {
		r.tee = l.tees[id]
	}
	var tee io.Writer
	if r.tee != nil {
		tee = r.tee
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
	r.readers = []*os.File{outR, errR}
	r.writers = []*lineWriter{
		newLineWriter(&l.mu, l.opts.Stdout, Prefix(id, l.opts.ColorStdout), tee),
		newLineWriter(&l.mu, l.opts.Stderr, Prefix(id, l.opts.ColorStderr), tee),
	}
	r.cmd = &exec.Cmd{
		Path:        l.path,
		Args:        append([]string{l.opts.Cmd}, l.opts.Args...),
		Env:         rankEnv(l.env, l.opts.Profile, t, l.attempt()),
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: sysProcAttr(),
	}
	err = r.cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return err
	}
	r.pgid = r.cmd.Process.Pid
	l.ranks = append(l.ranks, r)
	var drains sync.WaitGroup
	for i := range r.readers {
		copied.Add(1)
		drains.Add(1)
		go func() {
			defer copied.Done()
			defer drains.Done()
			drain(r.readers[i], r.writers[i])
		}()
	}
	drained := make(chan struct{})
	go func() {
		drains.Wait()
		close(drained)
	}()
	go func() {
		r.cmd.Wait() //nolint:errcheck // the status is in ProcessState
		// The rank's last words (why it failed) come before the launcher's
		// line about its exit; a process it left behind may hold the pipes
		// open, so the wait is short.
		select {
		case <-drained:
		case <-time.After(exitDrainWait):
		}
		exits <- exitEvent{id, r.cmd.ProcessState}
	}()
	return nil
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

func (l *launch) pgids() []int {
	g := make([]int, len(l.ranks))
	for i, r := range l.ranks {
		g[i] = r.pgid
	}
	return g
}

func (l *launch) signalAll(sig syscall.Signal) {
	for _, r := range l.ranks {
		signalGroup(r.pgid, sig)
	}
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

// run runs one attempt: it starts every rank and waits for all of them.
func (l *launch) run(ctx context.Context) (Outcome, error) {
	exits := make(chan exitEvent, l.opts.N)
	var copied sync.WaitGroup

	for id := range l.opts.N {
		if err := l.start(id, exits, &copied); err != nil {
			code := 1
			switch {
			case errors.Is(err, os.ErrNotExist):
				code = 127
			case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.ENOEXEC):
				code = 126
			}
			err = fmt.Errorf("starting rank %d: %w%s", id, err, ExecHint(err))
			if len(l.ranks) == 0 {
				return Outcome{Code: code, Rank: -1}, err
			}
			l.printf("%v; stopping %s", err, plural(len(l.ranks), "other rank"))
			l.stopAndWait(exits, len(l.ranks), &copied)
			return Outcome{Code: code, Rank: -1}, err
		}
	}

	var (
		running   = l.opts.N
		stopping  bool // SIGTERM or a forwarded signal went out
		termSent  bool // SIGTERM went out
		graceC    <-chan time.Time
		killed    bool // SIGKILL went out
		killedAt  time.Time
		failed    *exitEvent     // the first rank that exited non-zero
		launchSig syscall.Signal // the first signal forwarded, 0 if none
		ctxDone   = ctx.Done()
		ctxErr    error
	)
	stop := func(sig syscall.Signal) {
		l.signalAll(sig)
		termSent = termSent || sig == syscall.SIGTERM
		if !stopping {
			stopping = true
			graceC = time.After(l.opts.Grace)
		}
	}
	kill := func() {
		l.signalAll(syscall.SIGKILL)
		killed, killedAt, graceC = true, time.Now(), nil
	}
	forward := func(s os.Signal) {
		sig, ok := s.(syscall.Signal)
		if !ok {
			sig = syscall.SIGTERM
		}
		if launchSig == 0 {
			launchSig = sig
			if running > 0 {
				l.printf("got %s; forwarding it to %s", signalName(sig), plural(running, "rank"))
			}
		}
		stop(sig)
	}
	var poll <-chan time.Time
	for {
		if running == 0 {
			// Every rank has exited; wait for what they left in their
			// process groups.
			live := liveGroups(l.pgids())
			if len(live) == 0 {
				break
			}
			if !termSent && !killed {
				// A forwarded SIGINT, say, may be ignored by what is
				// left: background jobs of sh ignore it.
				stop(syscall.SIGTERM)
			}
			if killed && time.Since(killedAt) > 5*time.Second {
				l.printf("processes of process groups %v survived SIGKILL", keys(live))
				break
			}
			poll = time.After(20 * time.Millisecond)
		}
		select {
		case ev := <-exits:
			running--
			code := exitStatus(ev.ps)
			if code != 0 && failed == nil {
				failed = &ev
				if !stopping {
					msg := fmt.Sprintf("rank %d exited with code %d", ev.rank, code)
					if ws, ok := ev.ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
						msg = fmt.Sprintf("rank %d was killed by %s (code %d)", ev.rank, signalName(ws.Signal()), code)
					}
					if running > 0 {
						msg += "; stopping " + plural(running, "other rank")
					}
					l.printf("%s", msg)
					stop(syscall.SIGTERM)
				}
			}
		case s := <-l.opts.Signals:
			forward(s)
		case <-ctxDone:
			ctxDone, ctxErr = nil, ctx.Err()
			forward(syscall.SIGTERM)
		case <-graceC:
			kill()
		case <-poll:
		}
	}
	l.finishOutput(&copied)

	o := outcome(failed, launchSig)
	for _, r := range l.ranks {
		for _, w := range r.writers {
			if w.teeErr != nil {
				l.printf("--tee: rank %d: %v", r.id, w.teeErr)
				break
			}
		}
	}
	return o, ctxErr
}

// stopAndWait stops the n ranks started so far after a failure to start
// another, and waits for them and their process groups.
func (l *launch) stopAndWait(exits <-chan exitEvent, n int, copied *sync.WaitGroup) {
	l.signalAll(syscall.SIGTERM)
	deadline := time.After(l.opts.Grace)
	for n > 0 {
		select {
		case <-exits:
			n--
		case <-deadline:
			l.signalAll(syscall.SIGKILL)
			deadline = nil
		}
	}
	end := time.Now().Add(l.opts.Grace)
	for len(liveGroups(l.pgids())) > 0 && time.Now().Before(end) {
		time.Sleep(20 * time.Millisecond)
	}
	l.signalAll(syscall.SIGKILL)
	l.finishOutput(copied)
}

// finishOutput waits for the output goroutines, which end when every holder
// of a pipe's write end has exited. A process outside the ranks' process
// groups (one that called setsid, say) could hold a pipe open for ever, so
// after a short wait the read ends are closed under the readers.
func (l *launch) finishOutput(copied *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { copied.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		for _, r := range l.ranks {
			for _, f := range r.readers {
				f.Close()
			}
		}
		<-done
	}
	for _, r := range l.ranks {
		for _, f := range r.readers {
			f.Close()
		}
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func keys(m map[int]bool) []int {
	var k []int
	for g := range m {
		k = append(k, g)
	}
	return k
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS",
	syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2",
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}
