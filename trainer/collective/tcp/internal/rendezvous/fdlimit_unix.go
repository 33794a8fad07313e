//go:build unix

package rendezvous

import "syscall"

// fileLimit is this process's soft limit on open files (which Go raises
// to the hard limit at start-up). Unlimited is the largest value: it
// never falls short.
func fileLimit() (uint64, bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false
	}
	return lim.Cur, true
}
