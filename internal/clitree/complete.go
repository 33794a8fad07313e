// Package clitree is what batchkit derives from its urfave/cli command
// tree alone: shell completion candidates (complete.go) and the man page
// (man.go). It reads the tree, never runs an action, loads a profile or
// touches a file or the network.
package clitree

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// CompletionFlag is the last argument the completion scripts add to the
// words typed so far. Main answers it before urfave/cli sees the words:
// urfave's own completion turns itself off after a "--" and then runs the
// command's action, so TAB in 'batchkit sbatch -- ./train.sh' submitted a
// job. Completions only reads the command tree; it never runs an action,
// loads a profile or touches a file or the network.
const CompletionFlag = "--generate-bash-completion"

// CompletionRequest reports whether args (os.Args) ask for completion, and
// the words after the program name, the last of them the one being
// completed (possibly empty).
func CompletionRequest(args []string) (words []string, ok bool) {
	if len(args) < 2 || args[len(args)-1] != CompletionFlag {
		return nil, false
	}
	return args[1 : len(args)-1], true
}

// Completions lists the candidates for the last of words, given the words
// before it: subcommands, or flags when it starts with '-'. Nothing (the
// shell then completes file names) after "--", after a command's first
// argument (from there on every word is an argument: flags are parsed only
// before it), in a flag's value, or after an unknown command.
func Completions(app *cli.App, words []string) []string {
	cur := ""
	if len(words) > 0 {
		cur, words = words[len(words)-1], words[:len(words)-1]
	}
	cmds, flags, root := app.Commands, app.Flags, true
	value := false // the next word is a flag's value
	for _, w := range words {
		switch {
		case w == "=": // bash splits --flag=value at '=' (COMP_WORDBREAKS)
			value = true
		case value:
			value = false
		case w == "--":
			return nil
		case strings.HasPrefix(w, "-") && w != "-":
			value = TakesValue(flags, w)
		default:
			sub := FindCommand(cmds, w)
			if sub == nil {
				return nil
			}
			cmds, flags, root = sub.Subcommands, sub.Flags, false
		}
	}
	switch {
	case value || cur == "=":
		return nil
	case strings.HasPrefix(cur, "-"):
		return withPrefix(flagNames(flags, root), cur)
	default:
		return withPrefix(commandNames(cmds), cur)
	}
}

// TakesValue reports whether the flag word w (-n, --name) is followed by a
// value; with "=" it carries its own, and an unknown flag is taken to be a
// switch.
func TakesValue(flags []cli.Flag, w string) bool {
	if strings.Contains(w, "=") {
		return false
	}
	name := strings.TrimLeft(w, "-")
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			tv, ok := f.(interface{ TakesValue() bool })
			return ok && tv.TakesValue()
		}
	}
	return false
}

// FindCommand is the command of cmds named name, or nil.
func FindCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name || slices.Contains(c.Aliases, name) {
			return c
		}
	}
	return nil
}

func commandNames(cmds []*cli.Command) []string {
	var out []string
	for _, c := range cmds {
		if !c.Hidden {
			out = append(out, c.Name)
		}
	}
	return out
}

// flagNames lists a command's visible flags as typed: --long and -s. Every
// command has --help; the app also --version.
func flagNames(flags []cli.Flag, root bool) []string {
	var out []string
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		for _, n := range f.Names() {
			out = append(out, dashes(n))
		}
	}
	out = append(out, "--help", "-h")
	if root {
		out = append(out, "--version", "-v")
	}
	return unique(out)
}

// unique drops repeats, keeping the first (a command's own -h or -v).
func unique(names []string) []string {
	seen := map[string]bool{}
	out := names[:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func withPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}
