// Package clitree is what batchkit derives from its urfave/cli command
// tree alone: shell completion candidates (complete.go) and the man page
// (man.go). It reads the tree and, for completion, the values a flag
// lists (internal/flagvalues); it never runs an action, loads a profile or
// touches the network.
package clitree

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/internal/flagvalues"
)

// CompletionFlag is the last argument the completion scripts add to the
// words typed so far. Main answers it before urfave/cli sees the words:
// urfave's own completion turns itself off after a "--" and then runs the
// command's action, so TAB in 'batchkit sbatch -- ./train.sh' submitted a
// job. Completions reads the command tree and the values of the flags
// that have them (flagvalues: for --profile, the names in the profile
// directories); it never runs an action, reads a profile or touches
// another file or the network.
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
// before it: subcommands (after help, the commands it can show), flags
// when it starts with '-', a flag's values after a flag that has them
// (flagvalues.Flag). Nothing (the shell then completes file names) after "--",
// after a command's first argument (from there on every word is an
// argument: flags are parsed only before it), in the value of a flag
// without values or when none of them fits, or after an unknown command.
func Completions(app *cli.App, words []string) []string {
	cur := ""
	if len(words) > 0 {
		cur, words = words[len(words)-1], words[:len(words)-1]
	}
	cmds, flags, root := app.Commands, app.Flags, true
	value := false    // the next word is a flag's value
	var flag cli.Flag // the last flag named: whose value that is
	help := false     // the next word names the command help is for
	for _, w := range words {
		switch {
		case w == "=": // bash splits --flag=value at '=' (COMP_WORDBREAKS)
			value = true
		case value:
			value = false
		case help || w == "--":
			return nil
		case strings.HasPrefix(w, "-") && w != "-":
			flag, value = findFlag(flags, w), TakesValue(flags, w)
		case slices.Contains(helpNames, w) && len(cmds) > 0:
			help = true
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
		return flagvalues.Of(flag, strings.TrimPrefix(cur, "="))
	case strings.HasPrefix(cur, "-"):
		if name, v, ok := strings.Cut(cur, "="); ok { // zsh and fish keep --flag=value one word
			return withPrefix(flagvalues.Of(findFlag(flags, name), v), "", name+"=")
		}
		return withPrefix(flagNames(flags, root), cur, "")
	case help:
		return withPrefix(commandNames(cmds), cur, "")
	case len(cmds) > 0:
		return withPrefix(append(commandNames(cmds), helpNames[0]), cur, "")
	}
	return nil
}

// helpNames are the names of the help command urfave/cli gives the app
// and every group of subcommands (not the commands without subcommands:
// oneLineUsageErrors).
var helpNames = []string{"help", "h"}

// findFlag returns the flag the flag word w (-n, --name, --name=value)
// names, nil for an unknown one.
func findFlag(flags []cli.Flag, w string) cli.Flag {
	name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// TakesValue reports whether the flag word w (-n, --name) is followed by a
// value; with "=" it carries its own, and an unknown flag is taken to be a
// switch.
func TakesValue(flags []cli.Flag, w string) bool {
	tv, ok := findFlag(flags, w).(interface{ TakesValue() bool })
	return ok && tv.TakesValue() && !strings.Contains(w, "=")
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

// withPrefix keeps the names that start with prefix, each after add.
func withPrefix(names []string, prefix, add string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, add+n)
		}
	}
	return out
}
