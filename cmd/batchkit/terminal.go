package main

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"syscall"

	"github.com/mattn/go-isatty"
)

// What a stream gets is decided here, the one place: progress bars and
// colour only on the user's own terminal, so that batch logs get plain
// lines; colour never when NO_COLOR is set to anything but "" (no-color.org),
// unless the user asks for it by a flag (run --color always).
//
// A terminal is the user's when it is this process's controlling terminal,
// whatever launched it: a login shell, ssh -t, tmux, srun --pty. Open MPI
// gives each rank's stdout a pseudo terminal of its own, also when
// mpirun's stdout is a batch log; that terminal controls nobody (the ranks
// keep mpirun's, or have none in a batch job), so a rank's bar never goes
// into the log.

// terminal is a writer that knows whether it is a terminal: tests pass one
// to Main to stand for a terminal, which a buffer is not.
type terminal interface{ IsTerminal() bool }

// isTerminal reports whether w is the user's terminal: a terminal that is
// this process's controlling one.
func isTerminal(w io.Writer) bool {
	if t, ok := w.(terminal); ok {
		return t.IsTerminal()
	}
	f, ok := w.(*os.File)
	if !ok || !(isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		return false
	}
	var st syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &st) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return true // no /proc (not Linux): a terminal is all there is to know
	}
	ctty, ok := controllingTTY(stat)
	return ok && ctty != 0 && ctty == uint64(st.Rdev)
}

// controllingTTY reads tty_nr, the device number of the controlling
// terminal (0: none), from /proc/PID/stat: field 7, counted after the
// command name, which is in parentheses and may hold spaces and ')'. The
// kernel encodes it as it encodes st_rdev on 64-bit Linux
// (new_encode_dev), so the two compare as they are.
func controllingTTY(stat []byte) (uint64, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:]) // state ppid pgrp session tty_nr ...
	if len(f) < 5 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(f[4]), 10, 64)
	if err != nil {
		return 0, false
	}
	return uint64(uint32(n)), true
}

// useColor reports whether to colour what goes to w by default.
func useColor(w io.Writer, getenv func(string) string) bool {
	return getenv("NO_COLOR") == "" && isTerminal(w)
}
