package sbatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"

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

// Run pipes the script to `sbatch --parsable` and writes the job id to
// io.Stdout, a line as soon as sbatch prints it (before --wait blocks).
// With p.Wait, sbatch waits for the job to end and the code is the job's
// (sbatch --wait exits with it). Signals and cancelling ctx follow package
// launch: they reach sbatch, which stays in this process group. A failure
// of sbatch itself is a *SubmitError with sbatch's status as the code.
func Run(ctx context.Context, p Plan, io launch.IO, sigs <-chan os.Signal) (int, error) {
	args := []string{"--parsable"}
	if p.Wait {
		args = append(args, "--wait")
	}
	id := &idWriter{out: io.Stdout}
	var stderr bytes.Buffer
	cmd := exec.Command(Program, args...)
	cmd.Stdin = strings.NewReader(p.Text)
	cmd.Stdout, cmd.Stderr = id, &stderr
	code, err := launch.RunChild(ctx, cmd, sigs)
	jobID := id.done()
	var se *launch.StartError
	switch {
	case errors.As(err, &se):
		return se.Code, &SubmitError{Code: se.Code, Err: se.Err}
	case err != nil && ctx.Err() == nil: // waiting for sbatch failed
		return code, &SubmitError{Code: code, Stderr: stderr.String(), Err: err}
	case err == nil && code != 0 && (jobID == "" || !p.Wait): // sbatch's own failure, not the job's
		return code, &SubmitError{Code: code, Stderr: stderr.String(), Err: fmt.Errorf("exit status %d", code)}
	}
	return code, err
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
