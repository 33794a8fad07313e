// Package doctor is batchkit's preflight: checks of the profile, the
// scheduler, the MPI launcher, the scripts to source, the Python stack
// (torch, oneCCL bindings, IPEX), the topology, MASTER_PORT and core
// oversubscription, each answering OK, WARN, FAIL or SKIP with a fix.
//
// Checks touch the machine only through Env, so that tests hand them fake
// command outputs; the matching rules (version.go) are pure functions.
// Every external command runs under a timeout and Run has a deadline:
// doctor never hangs on a dead controller or a wedged NFS mount. What a
// command prints is bounded (ExecRunner), and every text of a result is
// one line, escaped and bounded (printable.Line) before anyone prints it:
// a tool's output cannot retitle or clear the terminal doctor writes to.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/internal/printable"
	"github.com/batchkit/batchkit/profile"
)

// Status is a check's verdict.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
	Skip Status = "skip"

	// notHere is a check about a stack this machine does not have (the
	// Intel checks on an Open MPI site): Run leaves its result out.
	notHere Status = "not here"
)

// Result is one check's outcome; Fix says what to do when it is not OK.
type Result struct {
	Name    string `json:"name"`
	Status  Status `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// Check is one named probe of the machine.
type Check struct {
	Name string
	Run  func(ctx context.Context, env *Env) Result
}

// Command is one external program to run.
type Command struct {
	Path string
	Args []string
	Env  []string // its whole environment; nil: this process's
}

func (c Command) String() string { return strings.TrimSpace(c.Path + " " + strings.Join(c.Args, " ")) }

// Runner runs a command to completion or until ctx is done, returning its
// stdout and stderr (ExecRunner: at most MaxOutput bytes of each).
type Runner func(ctx context.Context, c Command) (stdout, stderr string, err error)

// SourceFunc sets up a profile's environment as a job would: its scripts
// in order in one shell (oneCCL's vars.sh may need what setvars.sh set),
// then the oneCCL bindings' setvars.sh when it asks for them. The changes
// are relative to env.Environ().
type SourceFunc func(ctx context.Context, env *Env, penv profile.Env) (envsetup.Changes, error)

// Env is everything the checks read: the machine through functions, the
// profile already resolved, and the flags.
type Env struct {
	Getenv  func(string) string
	Environ func() []string // this process's, which the profile's scripts start from
	// LookPath finds file as exec.LookPath does, but on the PATH value
	// given: the job's PATH after its scripts is not this process's.
	LookPath func(file, path string) (string, error)
	Run      Runner
	Source   SourceFunc
	// Listen tries to bind a TCP port on every interface and releases it.
	Listen   func(port int) error
	SameFile func(a, b string) bool
	NumCPU   int // usable by this process (its CPU affinity)
	Hostname string

	ProfileName string
	Profile     *profile.Resolved // nil when ProfileErr is set
	ProfileErr  error

	Python    string // --python; "" = python3 on PATH
	SysPython string // the system interpreter compared with PATH's: /usr/bin/python3

	Timeout time.Duration // for each external command

	// LibDirs are the loader's default directories, searched after its
	// cache (DefaultLibDirs).
	LibDirs []string
	// CCLVersion is oneCCL's own version call (ccl::get_library_version),
	// in a binary built with the ccl backend: the library that binary runs
	// on. nil in a binary without it, which has no cgo: the version is
	// then read from the library found.
	CCLVersion func() string

	probes memo[PyInfo] // by interpreter path
	jobs   memo[jobEnv] // one key: the profile's

	ldcaches memo[map[string][]string] // one key: ldconfig -p's answer
}

// DefaultTimeout bounds each external command: scontrol ping against a
// dead controller, mpirun --version on a hung file system, a Python that
// imports torch from NFS.
const DefaultTimeout = 5 * time.Second

// CommandError is an external command that failed or timed out; it names
// the command.
type CommandError struct {
	Cmd      string
	TimedOut time.Duration // > 0: killed after this long
	Err      error
	Stderr   string // its last line, escaped and cut to a few hundred bytes
}

func (e *CommandError) Error() string {
	if e.TimedOut > 0 {
		return fmt.Sprintf("%s: timed out after %s", e.Cmd, e.TimedOut)
	}
	if e.Stderr != "" {
		return fmt.Sprintf("%s: %v: %s", e.Cmd, e.Err, e.Stderr)
	}
	return fmt.Sprintf("%s: %v", e.Cmd, e.Err)
}

func (e *CommandError) Unwrap() error { return e.Err }

// command runs c under the per-command timeout; a failure is a
// *CommandError.
func (env *Env) command(ctx context.Context, c Command) (stdout, stderr string, err error) {
	timeout := env.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stdout, stderr, err = env.Run(ctx, c)
	if err == nil {
		return stdout, stderr, nil
	}
	ce := &CommandError{Cmd: c.String(), Err: err, Stderr: printable.Line(lastLine(stderr), maxExcerpt)}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		ce.TimedOut = timeout
	}
	return stdout, stderr, ce
}

// memo runs a function once per key: the checks run concurrently, and
// those needing the same probe or the same sourcing wait for the one run,
// each until its own context is done.
type memo[T any] struct {
	mu    sync.Mutex
	calls map[string]*call[T]
}

type call[T any] struct {
	done chan struct{}
	val  T
	err  error
}

// do returns f's result for key, running f (with the first caller's
// context, which the checks share) only if no caller has yet.
func (m *memo[T]) do(ctx context.Context, key string, f func() (T, error)) (T, error) {
	m.mu.Lock()
	if m.calls == nil {
		m.calls = map[string]*call[T]{}
	}
	c, running := m.calls[key]
	if !running {
		c = &call[T]{done: make(chan struct{})}
		m.calls[key] = c
	}
	m.mu.Unlock()
	if !running {
		c.val, c.err = f()
		close(c.done)
	}
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.TrimSpace(s[strings.LastIndexByte(s, '\n')+1:])
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}

// Run runs the checks concurrently and returns their results in order,
// each text escaped and bounded for printing, leaving out the checks that
// do not apply to this machine at all (notHere). A check still running when
// ctx is done fails as unfinished: its goroutine is left to its own
// command timeout.
func Run(ctx context.Context, env *Env, checks []Check) []Result {
	chs := make([]chan Result, len(checks))
	for i, c := range checks {
		chs[i] = make(chan Result, 1)
		go func() {
			r := c.Run(ctx, env)
			r.Name = c.Name
			chs[i] <- r
		}()
	}
	results := make([]Result, len(checks))
	for i, c := range checks {
		select {
		case results[i] = <-chs[i]:
		case <-ctx.Done():
			select {
			case results[i] = <-chs[i]:
			default:
				results[i] = Result{Name: c.Name, Status: Fail,
					Message: fmt.Sprintf("did not finish within doctor's deadline (%v)", context.Cause(ctx)),
					Fix:     "something on this machine hangs: run the check's command by hand"}
			}
		}
		results[i] = results[i].escaped()
	}
	return slices.DeleteFunc(results, func(r Result) bool { return r.Status == notHere })
}

// Failed reports whether any result is a FAIL.
func Failed(rs []Result) bool {
	for _, r := range rs {
		if r.Status == Fail {
			return true
		}
	}
	return false
}
