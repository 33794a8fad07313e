// Package cmdgroup makes a command that batchkit runs only to ask something
// (a version probe, a script to source, python for the oneCCL bindings,
// sbatch --parsable) stoppable: exec.CommandContext kills only the direct
// child, and a wrapper script's sleeping grandchild would keep the pipes
// open and Wait blocked for ever.
package cmdgroup

import (
	"os/exec"
	"syscall"
	"time"
)

// Bound puts cmd, made with exec.CommandContext, in a process group of its
// own; when the context is done the whole group gets SIGKILL, and Wait
// returns at most waitDelay later even if something still holds cmd's
// output open. Call it before Start.
func Bound(cmd *exec.Cmd, waitDelay time.Duration) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
}
