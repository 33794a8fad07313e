package main

import (
	"io"
	"os"

	"github.com/mattn/go-isatty"
)

// What a stream gets is decided here, the one place: progress bars and
// colour only on a terminal, so that batch logs get plain lines; colour
// never when NO_COLOR is set to anything but "" (no-color.org), unless the
// user asks for it by a flag (run --color always).

// terminal is a writer that knows whether it is a terminal: tests pass one
// to Main to stand for a terminal, which a buffer is not.
type terminal interface{ IsTerminal() bool }

func isTerminal(w io.Writer) bool {
	if t, ok := w.(terminal); ok {
		return t.IsTerminal()
	}
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// useColor reports whether to colour what goes to w by default.
func useColor(w io.Writer, getenv func(string) string) bool {
	return getenv("NO_COLOR") == "" && isTerminal(w)
}
