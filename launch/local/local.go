// Package local is batchkit's own launcher for one machine: it starts N ranks
// of a command with the torchrun contract set (RANK, WORLD_SIZE, MASTER_ADDR
// ...), prefixes their output with the rank, forwards signals, and when one
// rank fails stops the others, leaving no process behind.
//
// It has package launch's shape: NewPlan checks the options (pure), Run
// starts the ranks. The other pure parts — each rank's environment
// (RankTopology, rankEnv), the line prefixing, the decision to restart
// (Decide) — are apart from the process management: starting a rank
// (rank.go) and waiting for an attempt's ranks, a small state machine of
// named steps (attempt.go).
package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/launch"
)

// DefaultGrace is how long stopped ranks get between SIGTERM and SIGKILL.
const DefaultGrace = 5 * time.Second

// Options are what batchkit run was asked for.
type Options struct {
	N    int      // number of ranks, at least 1
	Cmd  string   // the program, looked up on PATH like a shell does
	Args []string // its arguments
	// Env is the environment each rank inherits, os.Environ-style; nil means
	// os.Environ(). The torchrun contract and BATCHKIT_JOB_TOKEN are set on
	// top. A non-empty BATCHKIT_JOB_TOKEN in Env is kept for the first
	// attempt; every restart gets a fresh one (see MaxRestarts).
	Env []string

	// ColorStdout and ColorStderr colour the rank prefixes ("[RANK] ") on
	// that stream.
	ColorStdout, ColorStderr bool

	// TeeDir, if set, also gets each rank's stdout and stderr, unprefixed, in
	// TeeDir/rank-N.log. It is created if needed; existing logs are never
	// overwritten (Run fails with launch.ErrInvalid).
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

	// MaxRestarts is how many times all ranks are started again after a
	// rank failed (see Decide for which failures count), each time with a
	// new MASTER_PORT (unless MasterPort is set) and a new job token.
	MaxRestarts int
	// RestartBackoff is the wait before the first restart, doubled for
	// each next (Backoff); 0: DefaultRestartBackoff.
	RestartBackoff time.Duration
}

// Plan is a run decided but not started: the options, checked.
type Plan struct {
	Options
	Argv []string // what every rank runs: Cmd, then Args
	Tees []string // each rank's TeeDir log; nil without TeeDir
}

// NewPlan checks o. It is pure: Run looks the program up, chooses the port
// and the job token, and creates the logs. Its errors are
// launch.ErrInvalid.
func NewPlan(o Options) (Plan, error) {
	switch {
	case o.N < 1:
		return Plan{}, launch.Invalid("need at least 1 rank, got %d", o.N)
	case o.Cmd == "":
		return Plan{}, launch.Invalid("no command given")
	case o.Grace < 0:
		return Plan{}, launch.Invalid("grace period %v is negative", o.Grace)
	case o.MasterPort < 0 || o.MasterPort > 65535:
		return Plan{}, launch.Invalid("master port %d out of range 1-65535", o.MasterPort)
	case o.MaxRestarts < 0:
		return Plan{}, launch.Invalid("max restarts %d is negative", o.MaxRestarts)
	case o.RestartBackoff < 0:
		return Plan{}, launch.Invalid("restart backoff %v is negative", o.RestartBackoff)
	}
	p := Plan{Options: o, Argv: append([]string{o.Cmd}, o.Args...)}
	if o.TeeDir != "" {
		for i := range o.N {
			p.Tees = append(p.Tees, teePath(o.TeeDir, i))
		}
	}
	return p, nil
}

// Run starts p.N ranks of p.Cmd and waits until all have exited and no
// process is left in their process groups. Its ranks' stdout and stderr go
// to io's, each line prefixed "[RANK] "; the launcher's own messages go to
// io.Stderr; the ranks' stdin is /dev/null.
//
// Each rank runs in a process group of its own; signals go to the whole
// group, so they reach what the rank started too. Processes still in a
// rank's group when every rank has exited get SIGTERM, then SIGKILL after
// p.Grace; a process that left the group (setsid) is out of reach. On
// Linux a rank also gets SIGKILL if the launcher dies.
//
// When a rank exits non-zero or is killed, Run prints one line naming it to
// Stderr and stops the others: SIGTERM, then SIGKILL after p.Grace. A
// signal from sigs is forwarded to every rank, followed by SIGKILL after
// p.Grace if they are still running. Cancelling ctx stops the ranks like a
// SIGTERM would and makes Run return ctx's error.
//
// The code follows package launch:
//   - 0 when every rank succeeded;
//   - the first failing rank's status, where a rank killed by signal S
//     counts as 128+S, as shells report it;
//   - after a forwarded signal S, 128+S if every rank still exited 0.
//
// err is non-nil only if the launcher itself failed; the code is then 127
// when Cmd is not found, 126 when it cannot be executed, 2 for a tee log
// that exists, and 1 otherwise.
//
// With p.MaxRestarts, a failed attempt may be followed by another, after
// every rank of the old one and its process group are gone and a wait
// (Backoff; a signal meanwhile ends the run with the failed attempt's
// code); the result is the last attempt's.
func Run(ctx context.Context, p Plan, io launch.IO, sigs <-chan os.Signal) (exitCode int, err error) {
	r, code, err := prepare(p, io, sigs)
	if err != nil {
		return code, err
	}
	defer r.closeTees()
	return r.runAttempts(ctx)
}

// runner is one Run: what stays the same across its attempts, and the
// world (port, token) of the current one.
type runner struct {
	Plan
	io    launch.IO
	sigs  <-chan os.Signal
	path  string
	env   []string // base environment
	port  int      // this attempt's MASTER_PORT
	token string   // this attempt's job token
	runID string   // envvars.RunID: one per Run, the same in every attempt
	// restart counts the restarts so far: this attempt's
	// envvars.RestartCount.
	restart int
	tees    []*os.File

	mu    sync.Mutex // serialises all output lines
	ranks []*rank
}

// prepare resolves everything a run needs before any rank starts.
func prepare(p Plan, io launch.IO, sigs <-chan os.Signal) (*runner, int, error) {
	path, err := exec.LookPath(p.Cmd)
	if err != nil {
		err = launch.Started(err)
		return nil, err.(*launch.StartError).Code, err
	}
	r := &runner{Plan: p, io: io, sigs: sigs, path: path, env: p.Env, port: p.MasterPort,
		runID: fmt.Sprintf("batchkit-run-%d-%d", os.Getpid(), time.Now().UnixNano())}
	if r.env == nil {
		r.env = os.Environ()
	}
	if r.token, err = envsetup.LaunchToken(r.env, envsetup.NewToken); err != nil {
		return nil, 1, err
	}
	if r.port == 0 {
		if r.port, err = freePort(); err != nil {
			return nil, 1, err
		}
	}
	if p.Tees != nil {
		if r.tees, err = openTees(p.TeeDir, p.Tees); err != nil {
			return nil, 2, err
		}
	}
	return r, 0, nil
}

// openTees creates dir and the logs at paths, refusing to overwrite any
// existing log.
func openTees(dir string, paths []string) ([]*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, launch.Invalid("--tee: %v", err)
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return nil, launch.Invalid("--tee: %s exists; remove the old logs or choose another directory", p)
		}
	}
	var files []*os.File
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			for _, f := range files { // ours, and empty
				f.Close()
				os.Remove(f.Name())
			}
			if errors.Is(err, os.ErrExist) {
				return nil, launch.Invalid("--tee: %s exists; remove the old logs or choose another directory", p)
			}
			return nil, launch.Invalid("--tee: %v", err)
		}
		files = append(files, f)
	}
	return files, nil
}

func teePath(dir string, rank int) string {
	return filepath.Join(dir, "rank-"+strconv.Itoa(rank)+".log")
}

func (r *runner) closeTees() {
	for _, f := range r.tees {
		f.Close()
	}
}

// printf writes one launcher message line to Stderr.
func (r *runner) printf(format string, a ...any) {
	if r.io.Stderr == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.io.Stderr, "batchkit: "+format+"\n", a...)
}

func (r *runner) pgids() []int {
	g := make([]int, len(r.ranks))
	for i, rk := range r.ranks {
		g[i] = rk.pgid
	}
	return g
}

func (r *runner) signalAll(sig syscall.Signal) {
	for _, rk := range r.ranks {
		signalGroup(rk.pgid, sig)
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
