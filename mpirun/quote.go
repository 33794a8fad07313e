package mpirun

import (
	"fmt"
	"strings"

	shsyntax "mvdan.cc/sh/v3/syntax"
)

// ShellJoin renders argv as one bash command line that runs exactly argv:
// each argument quoted as needed (syntax.Quote of mvdan.cc/sh), so no expansion, word
// splitting or globbing can touch it.
func ShellJoin(argv []string) (string, error) {
	parts := make([]string, len(argv))
	for i, a := range argv {
		q, err := shsyntax.Quote(a, shsyntax.LangBash)
		if err != nil {
			return "", err
		}
		parts[i] = q
	}
	return strings.Join(parts, " "), nil
}

// DryRun renders spec as --dry-run prints it: the command on one line,
// shell-quoted, preceded by the generated hostfile's content as comments
// when there is one (hostfile; spec.Hostfile is then the name it is shown
// under).
func DryRun(spec Spec, hostfile string) (string, error) {
	argv, err := Command(spec)
	if err != nil {
		return "", err
	}
	line, err := ShellJoin(argv)
	if err != nil {
		return "", err
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
