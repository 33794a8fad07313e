package local

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// signalGroup sends sig to every process of the group pgid; a group that is
// gone already is not an error.
func signalGroup(pgid int, sig syscall.Signal) {
	if pgid > 1 {
		syscall.Kill(-pgid, sig) //nolint:errcheck // ESRCH: nothing left to signal
	}
}

// liveGroups reports which of the process groups still hold a process that
// is not a zombie. A zombie is dead: it only waits for its parent (or, for an
// orphan, PID 1, which in a container may never reap it) to collect it.
//
// It reads /proc; without /proc it falls back to kill(-pgid, 0), which counts
// zombies as alive.
func liveGroups(pgids []int) map[int]bool {
	want := make(map[int]bool, len(pgids))
	for _, g := range pgids {
		want[g] = true
	}
	live := map[int]bool{}
	entries, err := os.ReadDir("/proc")
	if err != nil || len(entries) == 0 {
		for _, g := range pgids {
			if err := syscall.Kill(-g, 0); err == nil || errors.Is(err, syscall.EPERM) {
				live[g] = true
			}
		}
		return live
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		state, pgid, ok := parseStat(b)
		if ok && want[pgid] && state != 'Z' && state != 'X' {
			live[pgid] = true
		}
	}
	return live
}

// parseStat reads the state and process group from /proc/PID/stat:
// "pid (comm) state ppid pgrp ...", where comm may hold spaces and parentheses.
func parseStat(b []byte) (state byte, pgid int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pgid, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pgid, true
}
