package clitree

import (
	"fmt"
	"io"
	"strings"

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/urfave/cli/v2"
)

// ManPage is the rest of a man page: its EXIT STATUS (status, meaning,
// the commands that exit so) and ENVIRONMENT (name, meaning: plain text,
// as a flag's usage) entries and its SEE ALSO line (Markdown).
type ManPage struct {
	ExitStatuses [][3]string
	Environment  [][2]string
	SeeAlso      string
}

// Render writes app and p as roff, man section 1: every visible command
// with its synopsis, its description line for line and its flags, through
// Markdown that md2man turns into roff. urfave/cli's own ToMan leaves out
// each command's Description, where the examples are. No date in it: the
// same tree gives the same page (reproducible builds).
func (p ManPage) Render(app *cli.App) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%% %s 1 \"\" \"%s %s\" \"User Commands\"\n\n", app.Name, app.Name, app.Version)
	fmt.Fprintf(&b, "# NAME\n\n%s - %s\n\n", app.Name, app.Usage)
	fmt.Fprintf(&b, "# SYNOPSIS\n\n**%s** [**--help**] [**--version**] *command* [*options*] [*arguments*]\n\n", app.Name)
	fmt.Fprintf(&b, "# DESCRIPTION\n\n")
	writeManText(&b, app.Description)
	fmt.Fprintf(&b, "# COMMANDS\n\n")
	writeManCommands(&b, app.Name, app.Commands)
	fmt.Fprintf(&b, "# EXIT STATUS\n\n")
	for _, e := range p.ExitStatuses {
		fmt.Fprintf(&b, "**%s**\n: %s (%s)\n\n", e[0], e[1], e[2])
	}
	fmt.Fprintf(&b, "# ENVIRONMENT\n\n")
	for _, e := range p.Environment {
		fmt.Fprintf(&b, "**%s**\n: %s\n\n", e[0], manEscape(e[1]))
	}
	fmt.Fprintf(&b, "# SEE ALSO\n\n%s\n", p.SeeAlso)
	return md2man.Render([]byte(b.String()))
}

// writeManCommands writes each visible command of the tree under its full
// name ("batchkit hostlist expand").
func writeManCommands(w io.Writer, parent string, cmds []*cli.Command) {
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		name := parent + " " + c.Name
		fmt.Fprintf(w, "### %s\n\n%s\n\n", name, c.Usage)
		fmt.Fprintf(w, "**%s**", name)
		if len(c.VisibleFlags()) > 0 {
			fmt.Fprint(w, " [*options*]")
		}
		if c.ArgsUsage != "" {
			fmt.Fprintf(w, " %s", manEscape(c.ArgsUsage))
		}
		fmt.Fprint(w, "\n\n")
		writeManText(w, c.Description)
		for _, f := range c.VisibleFlags() {
			writeManFlag(w, f)
		}
		writeManCommands(w, name, c.Subcommands)
	}
}

// writeManText keeps a description's lines as they are (its examples are
// laid out for a terminal), as a block of preformatted text.
func writeManText(w io.Writer, text string) {
	if text = strings.TrimSpace(text); text == "" {
		return
	}
	fmt.Fprint(w, "```\n")
	for _, l := range strings.Split(text, "\n") {
		fmt.Fprintln(w, l)
	}
	fmt.Fprint(w, "```\n\n")
}

// writeManFlag writes a flag as a definition list item: its names, a value
// placeholder if it takes one, then its usage and default.
func writeManFlag(w io.Writer, f cli.Flag) {
	var names []string
	for _, n := range f.Names() {
		names = append(names, "**"+dashes(n)+"**")
	}
	term := strings.Join(names, ", ")
	d, ok := f.(cli.DocGenerationFlag)
	if !ok {
		fmt.Fprintf(w, "%s\n\n", term)
		return
	}
	usage := strings.ReplaceAll(d.GetUsage(), "`", "") // `DIR`: the value's name in --help
	if d.TakesValue() {
		term += "=*value*"
		def := d.GetDefaultText()
		if def == "" {
			def = d.GetValue()
		}
		if def != "" && def != `""` {
			usage += " (default: " + def + ")"
		}
	}
	fmt.Fprintf(w, "%s\n: %s\n\n", term, manEscape(usage))
}

// manEscape keeps Markdown from reading a flag's or an argument's text as
// markup: * _ ` [ ] and < (a tag) are literal in help text.
var manEscape = strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "`", "\\`", "[", `\[`, "]", `\]`, "<", `\<`).Replace
