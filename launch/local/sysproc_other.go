//go:build !linux

package local

import "syscall"

// sysProcAttr puts a rank in a process group of its own, so that a signal to
// the group reaches everything the rank started.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
