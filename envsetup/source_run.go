package envsetup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batchkit/batchkit/internal/cmdgroup"
	"github.com/batchkit/batchkit/internal/infile"
	"github.com/batchkit/batchkit/internal/printable"
)

// DefaultTimeout bounds one sourcing, every script together.
const DefaultTimeout = 60 * time.Second

// SourceError is a script that could not be sourced: missing, unreadable,
// failing (a non-zero return or exit), or still running at the timeout.
type SourceError struct {
	Script string
	Code   int    // its exit status; -1 when it did not run or was killed
	Stderr string // the last lines of its stderr (of its stdout when stderr is empty)
	Err    error  // the cause, when there is one beyond the exit status
}

func (e *SourceError) Error() string {
	msg := fmt.Sprintf("sourcing %s failed", e.Script)
	switch {
	case e.Err != nil && e.Code >= 0:
		msg += fmt.Sprintf(" (exit %d): %v", e.Code, e.Err)
	case e.Err != nil:
		msg += ": " + e.Err.Error()
	default:
		msg += fmt.Sprintf(" (exit %d)", e.Code)
	}
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

func (e *SourceError) Unwrap() error { return e.Err }

// ErrTimeout is the cause of a SourceError for a script still running when
// the time was up.
var ErrTimeout = errors.New("timed out")

// ErrExited is the cause of a SourceError for a script that ended the
// shell (exit) instead of returning to it: its environment is lost.
var ErrExited = errors.New("it exited the shell instead of returning (was it written to be sourced?)")

// tailLines is how many of a failed script's last output lines its error
// shows.
const tailLines = 3

// program is the bash program that sources the scripts. Its arguments are
// the work directory, then per script: the argument count, the path, the
// arguments. Nothing of them is ever part of the shell text. It dumps the
// environment before and after into files of its own, so the scripts'
// chatter on stdout cannot mix in, and the "before" dump comes from the
// same bash, so whatever bash itself adds or drops is in both. Each
// script's output goes to files of its own (a { } group runs in this
// shell), for the failing one's last lines. `set --`
// then a plain `source FILE` gives a script exactly its arguments, none
// inherited (bash's source without arguments keeps the caller's).
const program = `__batchkit_dir=$1; shift
command -p env -0 > "$__batchkit_dir/before" || exit 125
__batchkit_i=0
while [ "$#" -gt 0 ]; do
	__batchkit_n=$1 __batchkit_script=$2
	shift 2
	__batchkit_args=("${@:1:$__batchkit_n}")
	shift "$__batchkit_n"
	__batchkit_rest=("$@")
	printf '%s' "$__batchkit_i" > "$__batchkit_dir/current"
	set -- "${__batchkit_args[@]}"
	{ source "$__batchkit_script"; } >"$__batchkit_dir/out.$__batchkit_i" 2>"$__batchkit_dir/err.$__batchkit_i"
	__batchkit_rc=$?
	[ "$__batchkit_rc" -eq 0 ] || exit "$__batchkit_rc"
	set -- "${__batchkit_rest[@]}"
	__batchkit_i=$((__batchkit_i + 1))
done
command -p env -0 > "$__batchkit_dir/after" || exit 125
`

// Runner sources scripts with real bash.
type Runner struct {
	Bash    string        // the bash binary; "" looks it up on PATH
	Timeout time.Duration // 0: DefaultTimeout; negative: refused (CheckTimeout)
}

// CheckTimeout refuses a time for sourcing that is not a positive
// duration, naming the flag it came from: 0 and -1s once meant 60 s
// without a word.
func CheckTimeout(flag string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("invalid %s %v: want a positive duration (such as 60s or 2m)", flag, d)
	}
	return nil
}

// Source sources scripts in order in one bash started with environ and
// returns what they changed. On any failure nothing is returned to apply.
func (r Runner) Source(ctx context.Context, environ []string, scripts []Script) (Changes, error) {
	if len(scripts) == 0 {
		return Changes{Set: map[string]string{}, Unset: []string{}}, nil
	}
	if r.Timeout < 0 {
		return Changes{}, CheckTimeout("timeout", r.Timeout)
	}
	abs, err := checkScripts(scripts)
	if err != nil {
		return Changes{}, err
	}
	dir, err := os.MkdirTemp("", "batchkit-envsetup-")
	if err != nil {
		return Changes{}, &TempDirError{Dir: os.TempDir(), Err: unwrapPath(err)}
	}
	defer os.RemoveAll(dir)
	// The dumps need room: a full TMPDIR would fail the first dump or a
	// script's redirection, and be taken for the script failing.
	room := 2*environSize(environ) + roomMargin
	if err := checkRoom(dir, room); err != nil {
		return Changes{}, err
	}
	if err := r.run(ctx, dir, environ, abs); err != nil {
		// A script that filled it is told apart the same way.
		if full := checkRoom(dir, room); full != nil {
			return Changes{}, full
		}
		return Changes{}, err
	}
	before, err1 := os.ReadFile(filepath.Join(dir, "before"))
	after, err2 := os.ReadFile(filepath.Join(dir, "after"))
	if err1 != nil || err2 != nil {
		// bash ended well, but before the end of the program: a script ran
		// exit 0 instead of return.
		i := failedScript(dir, abs)
		return Changes{}, &SourceError{Script: abs[i].Path, Code: 0, Err: ErrExited, Stderr: outputTail(dir, i)}
	}
	b := ParseDump(before)
	return Diff(b, DedupeLists(b, ParseDump(after))), nil
}

// TempDirError is the temporary directory sourcing writes its environment
// dumps and the scripts' output to ($TMPDIR, else /tmp) failing: full, over
// quota, read-only, missing. It is named, not blamed on a script.
type TempDirError struct {
	Dir string
	Err error
}

func (e *TempDirError) Error() string {
	fix := "point TMPDIR at a writable directory"
	if errors.Is(e.Err, syscall.ENOSPC) || errors.Is(e.Err, syscall.EDQUOT) {
		fix = "free space there or point TMPDIR at another directory"
	}
	return fmt.Sprintf("sourcing writes the environment to the temporary directory %s ($TMPDIR): %v: %s", e.Dir, e.Err, fix)
}

func (e *TempDirError) Unwrap() error { return e.Err }

// roomMargin is what sourcing writes besides the two dumps: the scripts'
// output files and bash's own.
const roomMargin = 64 << 10

func environSize(environ []string) int {
	n := 0
	for _, kv := range environ {
		n += len(kv) + 1
	}
	return n
}

// checkRoom writes n bytes to a file in dir and removes it: a
// TempDirError (dir's parent named, as TMPDIR is) when they do not fit.
func checkRoom(dir string, n int) error {
	f, err := os.CreateTemp(dir, "room-")
	if err == nil {
		_, err = f.Write(make([]byte, n))
		err = errors.Join(err, f.Close())
		os.Remove(f.Name())
	}
	if err != nil {
		return &TempDirError{Dir: filepath.Dir(dir), Err: unwrapPath(err)}
	}
	return nil
}

// checkScripts makes every path absolute (source looks a bare name up on
// PATH) and checks that each file can be read, for an error that names it.
func checkScripts(scripts []Script) ([]Script, error) {
	out := make([]Script, len(scripts))
	for i, s := range scripts {
		p, err := filepath.Abs(s.Path)
		if err != nil {
			return nil, &SourceError{Script: s.Path, Code: -1, Err: err}
		}
		// Checked before any open: opening a FIFO blocks, and bash would
		// read /dev/zero for ever.
		err = infile.Check(p)
		if err == nil {
			var f *os.File
			if f, err = os.Open(p); err == nil {
				f.Close()
			}
		}
		if err != nil {
			return nil, &SourceError{Script: s.Path, Code: -1, Err: unwrapPath(err)}
		}
		out[i] = Script{Path: p, Args: s.Args}
	}
	return out, nil
}

// unwrapPath drops the *PathError's repetition of the path the
// SourceError already names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// run starts bash in its own process group, so that at the timeout the
// scripts' children die with it, and maps its failure to a SourceError.
func (r Runner) run(ctx context.Context, dir string, environ []string, scripts []Script) error {
	bash := r.Bash
	if bash == "" {
		p, err := exec.LookPath("bash")
		if err != nil {
			return &SourceError{Script: scripts[0].Path, Code: -1, Err: fmt.Errorf("bash is needed to source it: %w", err)}
		}
		bash = p
	}
	if ctx == nil {
		ctx = context.Background()
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := []string{"--noprofile", "--norc", "-c", program, "batchkit-envsetup", dir}
	for _, s := range scripts {
		args = append(append(args, strconv.Itoa(len(s.Args)), s.Path), s.Args...)
	}
	cmd := exec.CommandContext(ctx, bash, args...)
	cmd.Env = environ
	// Files, not pipes: a daemon a script leaves running must not keep
	// Wait waiting for the end of its output.
	stdout, err1 := os.Create(filepath.Join(dir, "stdout"))
	stderr, err2 := os.Create(filepath.Join(dir, "stderr"))
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	defer stdout.Close()
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmdgroup.Bound(cmd, 2*time.Second)
	err := cmd.Run()
	if err == nil {
		return nil
	}
	i := failedScript(dir, scripts)
	se := &SourceError{Script: scripts[i].Path, Code: -1, Stderr: outputTail(dir, i)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		// A deadline already past (a timeout of 1ns) stops Run before
		// bash starts: there is no process, and no group to kill.
		if cmd.Process != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever is left of the group
		}
		se.Err = fmt.Errorf("%w after %s", ErrTimeout, timeout)
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		se.Code = ee.ExitCode()
	default:
		se.Err = err
	}
	return se
}

// failedScript is the index of the script that was being sourced when
// bash failed.
func failedScript(dir string, scripts []Script) int {
	b, err := os.ReadFile(filepath.Join(dir, "current"))
	if i, err2 := strconv.Atoi(string(b)); err == nil && err2 == nil && 0 <= i && i < len(scripts) {
		return i
	}
	return 0
}

// outputTail is the last lines of script i's stderr, or of its stdout when
// stderr is empty (oneAPI's setvars.sh says why it refuses on stdout), or
// of bash's own, on one line.
func outputTail(dir string, i int) string {
	for _, name := range []string{"err." + strconv.Itoa(i), "out." + strconv.Itoa(i), "stderr", "stdout"} {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		if t := tail(b, tailLines); t != "" {
			return t
		}
	}
	return ""
}

// tail is the last n lines of b that are not blank, each escaped and cut
// to maxTailLine bytes (printable.Line): a script's binary or endless
// output, or its escape sequences, must not become the error line.
func tail(b []byte, n int) string {
	var lines []string
	for _, l := range strings.Split(string(bytes.TrimSpace(b)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = printable.Line(l, maxTailLine)
	}
	return strings.Join(lines, " | ")
}

// maxTailLine bounds each line of a failed script's output that its error
// quotes.
const maxTailLine = 300
