package launch

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/batchkit/batchkit/internal/cmdgroup"
)

// TimeoutError is a command batchkit ran only to ask something (a
// launcher's --version, sbatch --parsable) that did not answer in time; it
// was killed with everything it started. errors.Is(err,
// context.DeadlineExceeded) holds.
type TimeoutError struct {
	Command []string
	After   time.Duration
	Hint    string // what to do or check, or ""
}

func (e *TimeoutError) Error() string {
	msg := fmt.Sprintf("%s: no answer within %v (killed it)", strings.Join(e.Command, " "), e.After)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// askWaitDelay is how long Ask waits for the output's pipes to close after
// killing the command: something it started that left its process group
// may still hold them.
const askWaitDelay = time.Second

// Ask runs argv and returns its combined output: a command run only for
// its answer. It and whatever it starts are killed after timeout, and the
// error is then a *TimeoutError. Any other failure is exec's, output
// included.
func Ask(timeout time.Duration, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmdgroup.Bound(cmd, askWaitDelay)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return out.String(), &TimeoutError{Command: argv, After: timeout}
	}
	return out.String(), err
}
