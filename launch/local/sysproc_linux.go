package local

import "syscall"

// sysProcAttr puts a rank in a process group of its own, so that a signal to
// the group reaches everything the rank started, and kills the rank if the
// launcher dies without cleaning up (killed with SIGKILL, say).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
