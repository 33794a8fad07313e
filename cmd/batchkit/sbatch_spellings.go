package main

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/internal/clitree"
	"github.com/batchkit/batchkit/launch/sbatch"
)

// How batchkit sbatch reads sbatch's own spellings of its options: the
// attached short forms (-N2) and, for an option it has no flag for, a hint
// (sbatch.OptionHint) instead of "flag provided but not defined".

// sbatchSpellings rewrites the attached short forms sbatch takes (-N2,
// -t30, -Jtrain) among batchkit sbatch's flags into -N=2 ..., which the
// flag parser reads; it would take -N2 for a flag named "N2". Only the
// words before the program are flags, and a flag's value given as the next
// word is skipped. Other commands' arguments are returned as they are.
func sbatchSpellings(app *cli.App, args []string) []string {
	cmd := clitree.FindCommand(app.Commands, "sbatch")
	if len(args) < 2 || cmd == nil || args[1] != cmd.Name {
		return args
	}
	out := slices.Clone(args)
	for i := 2; i < len(out); i++ {
		w := out[i]
		if w == "--" || w == "-" || !strings.HasPrefix(w, "-") {
			break
		}
		if clitree.TakesValue(cmd.Flags, w) {
			i++ // its value, whatever it looks like
			continue
		}
		out[i] = attachedShort(cmd.Flags, w)
	}
	return out
}

// attachedShort is -X=rest for a word -Xrest whose X is a one-letter flag
// taking a value, unless Xrest names a flag itself (-ntasks-per-node).
func attachedShort(flags []cli.Flag, w string) string {
	if strings.HasPrefix(w, "--") || len(w) < 3 {
		return w
	}
	name, _, _ := strings.Cut(w[1:], "=")
	if isFlag(flags, name) || !clitree.TakesValue(flags, w[:2]) {
		return w
	}
	return w[:2] + "=" + w[2:]
}

func isFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}

// sbatchUsageError turns "flag provided but not defined" for an sbatch
// option batchkit sbatch has no flag for into what to write instead.
func sbatchUsageError(c *cli.Context, err error, sub bool) error {
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		if hint := sbatch.OptionHint(writtenAs(c, name), func(long string) bool { return isFlag(c.Command.Flags, long) }); hint != "" {
			return usagef("%s", hint)
		}
	}
	return onUsageError(c, err, sub)
}

// writtenAs is the word of the command line that the flag parser reported
// as name (it drops the dashes and any "=VALUE"); "--name" if none is.
func writtenAs(c *cli.Context, name string) string {
	if lineage := c.Lineage(); len(lineage) > 1 {
		for _, w := range lineage[1].Args().Slice() {
			if n, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "="); n == name && strings.HasPrefix(w, "-") {
				return w
			}
		}
	}
	return "--" + name
}
