package mpirun

import (
	"fmt"
	"strings"

	"github.com/batchkit/batchkit/internal/shquote"
)

// DryRun renders spec as --dry-run prints it: the command, POSIX
// single-quoted by shquote.Join so that it can be pasted into sh, bash or
// zsh, preceded by the generated hostfile's content as comments when there
// is one (hostfile; spec.Hostfile is then the name it is shown under). It
// is one line unless an argument holds a line break, which stays literal
// inside its quotes: no POSIX quoting writes one any other way.
func DryRun(spec Spec, hostfile string) (string, error) {
	argv, err := Command(spec)
	if err != nil {
		return "", err
	}
	line, err := shquote.Join(argv)
	if err != nil {
		return "", fmt.Errorf("dry-run command line: %w", err)
	}
	var b strings.Builder
	if hostfile != "" {
		fmt.Fprintf(&b, "# %s (a temporary file when run):\n", spec.Hostfile)
		for _, l := range strings.Split(strings.TrimSuffix(hostfile, "\n"), "\n") {
			fmt.Fprintf(&b, "#   %s\n", l)
		}
	}
	b.WriteString(line)
	b.WriteByte('\n')
	return b.String(), nil
}
