package sbatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batchkit/batchkit/internal/cmdgroup"
	"github.com/batchkit/batchkit/launch"
)

// Program is the sbatch that Run starts, looked up on PATH.
const Program = "sbatch"

// SubmitError is sbatch's own failure, shown as sbatch said it; Code is
// sbatch's exit status, Run's code.
type SubmitError struct {
	Code   int
	Stderr string
	Err    error
}

func (e *SubmitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("sbatch failed (exit %d): %s", e.Code, msg)
}
func (e *SubmitError) Unwrap() error { return e.Err }

// DefaultSubmitTimeout bounds sbatch --parsable without --wait, which
// answers as soon as slurmctld has queued the job: generous for a
// controller that is busy or failing over, short of a hang.
const DefaultSubmitTimeout = 2 * time.Minute

// Run pipes the script to `sbatch --parsable` and writes the job id to
// io.Stdout, a line as soon as sbatch prints it (before --wait blocks).
// With p.Wait, sbatch waits for the job to end and the code is the job's
// (sbatch --wait exits with it); a job that failed gets a line on
// io.Stderr with its state and output file, from scontrol (FailedLine). Without, sbatch only asks for a job id:
// it runs in a process group of its own, killed whole when it has not
// answered within p.SubmitTimeout (a *launch.TimeoutError, code 1).
// Signals and cancelling ctx follow package launch: they reach sbatch (a
// terminal's Ctrl-C through batchkit, which forwards it, when sbatch has
// its own group). A failure of sbatch itself is a *SubmitError with
// sbatch's status as the code.
func Run(ctx context.Context, p Plan, io launch.IO, sigs <-chan os.Signal) (int, error) {
	argv := []string{Program, "--parsable"}
	if p.Wait {
		argv = append(argv, "--wait")
	}
	id := &idWriter{out: io.Stdout}
	var stderr bytes.Buffer
	cmd, timedOut, release := submitCommand(argv, p)
	defer release()
	cmd.Stdin = strings.NewReader(p.Text)
	cmd.Stdout, cmd.Stderr = id, &stderr
	code, err := launch.RunChild(ctx, cmd, sigs)
	jobID := id.done()
	var se *launch.StartError
	switch {
	case errors.As(err, &se):
		return se.Code, &SubmitError{Code: se.Code, Err: se.Err}
	case code != 0 && timedOut():
		return 1, &launch.TimeoutError{Command: argv, After: p.submitTimeout(),
			Hint: "the job may have been queued all the same: check squeue --me"}
	case err != nil && ctx.Err() == nil: // waiting for sbatch failed
		return code, &SubmitError{Code: code, Stderr: stderr.String(), Err: err}
	case err == nil && code != 0 && (jobID == "" || !p.Wait): // sbatch's own failure, not the job's
		return code, &SubmitError{Code: code, Stderr: stderr.String(), Err: fmt.Errorf("exit status %d", code)}
	case err == nil && p.Wait && ctx.Err() == nil && io.Stderr != nil:
		return waited(jobID, code, io.Stderr), nil
	}
	return code, err
}

// waited is the code of job id that sbatch --wait saw end with code. A job
// that failed keeps its code and gets a line saying what became of it and
// where its output is; one that ended in a failed state with code 0 (sbatch
// --wait exits 0 for a job cancelled before it ran) exits 1 with that line:
// it did not run to completion.
func waited(id string, code int, stderr io.Writer) int {
	st, err := jobState(id)
	failed := err == nil && slices.Contains(failedStates, st.State)
	if code == 0 && !failed {
		return 0
	}
	fmt.Fprintf(stderr, "batchkit: %s\n", FailedLine(id, code, st, err))
	return max(code, 1)
}

// submitCommand is the sbatch to run, whether it was killed for taking
// too long, and what to call when done with it. sbatch --wait takes as
// long as the job and stays in this process group; a submission only is
// bounded (cmdgroup.Bound).
func submitCommand(argv []string, p Plan) (cmd *exec.Cmd, timedOut func() bool, release func()) {
	if p.Wait {
		return exec.Command(argv[0], argv[1:]...), func() bool { return false }, func() {}
	}
	// Not ctx's child: cancelling ctx is RunChild's SIGTERM, not a kill.
	tctx, cancel := context.WithTimeout(context.Background(), p.submitTimeout())
	cmd = exec.CommandContext(tctx, argv[0], argv[1:]...)
	cmdgroup.Bound(cmd, time.Second)
	return cmd, func() bool { return tctx.Err() == context.DeadlineExceeded }, cancel
}

func (p Plan) submitTimeout() time.Duration {
	if p.SubmitTimeout > 0 {
		return p.SubmitTimeout
	}
	return DefaultSubmitTimeout
}

// idWriter takes sbatch --parsable's output and writes the job id, a line,
// to out as soon as the first line is complete.
type idWriter struct {
	mu  sync.Mutex
	out io.Writer
	buf bytes.Buffer
	id  string
}

func (w *idWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	if w.id == "" {
		if line, _, ok := bytes.Cut(w.buf.Bytes(), []byte("\n")); ok {
			w.report(parseJobID(string(line)))
		}
	}
	return len(b), nil
}

// done returns the job id, also one sbatch printed without a line break
// (not written to out: it may be half of one).
func (w *idWriter) done() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.id == "" {
		w.id = parseJobID(w.buf.String())
	}
	return w.id
}

func (w *idWriter) report(id string) {
	if id == "" {
		return
	}
	w.id = id
	if w.out != nil {
		fmt.Fprintln(w.out, id)
	}
}

// parseJobID reads "1234" or "1234;cluster" from sbatch --parsable.
func parseJobID(s string) string {
	s = strings.TrimSpace(s)
	id, _, _ := strings.Cut(s, ";")
	return id
}
