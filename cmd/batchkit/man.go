package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/envvars"
)

// The man page is generated from the command tree (make man: 'batchkit
// man' > man/batchkit.1), so it says what --help says. urfave/cli's own
// ToMan leaves out each command's Description, where the examples are:
// this writes the page as Markdown, every command with its synopsis, its
// description line for line and its flags, and md2man turns it into roff.
// No date in it: the same tree gives the same page (reproducible builds).

func manCommand() *cli.Command {
	return &cli.Command{
		Name:   "man",
		Usage:  "print the man page batchkit(1), generated from the commands' help, in roff",
		Hidden: true, // for make man, not for users
		Description: `Examples:
   batchkit man > batchkit.1
   batchkit man | man -l -`,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("man takes no arguments, got %q", c.Args().First())
			}
			_, err := c.App.Writer.Write(manPage(c.App))
			return err
		},
	}
}

// manPage renders app as roff, man section 1.
func manPage(app *cli.App) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%% %s 1 \"\" \"%s %s\" \"User Commands\"\n\n", app.Name, app.Name, app.Version)
	fmt.Fprintf(&b, "# NAME\n\n%s - %s\n\n", app.Name, app.Usage)
	fmt.Fprintf(&b, "# SYNOPSIS\n\n**%s** [**--help**] [**--version**] *command* [*options*] [*arguments*]\n\n", app.Name)
	fmt.Fprintf(&b, "# DESCRIPTION\n\n")
	writeManText(&b, app.Description)
	fmt.Fprintf(&b, "# COMMANDS\n\n")
	writeManCommands(&b, app.Name, app.Commands)
	fmt.Fprintf(&b, "# EXIT STATUS\n\n")
	for _, e := range exitStatuses {
		fmt.Fprintf(&b, "**%s**\n: %s (%s)\n\n", e.Status, e.Meaning, e.From)
	}
	fmt.Fprintf(&b, "# ENVIRONMENT\n\n")
	for _, e := range manEnvironment() {
		fmt.Fprintf(&b, "**%s**\n: %s\n\n", e.Name, manEscape(e.Means))
	}
	var see []string
	for _, p := range manSeeAlso {
		see = append(see, fmt.Sprintf("**%s**(%s)", p.name, p.section))
	}
	fmt.Fprintf(&b, "# SEE ALSO\n\n%s; the README and docs/ of batchkit.\n", strings.Join(see, ", "))
	return md2man.Render([]byte(b.String()))
}

// manEnvironment is what batchkit itself reads, beyond the launchers'
// variables that 'batchkit env' documents: every BATCHKIT_* variable
// (envvars.Read, which a test keeps complete), then NO_COLOR.
func manEnvironment() []envvars.Var {
	return append(slices.Clone(envvars.Read),
		envvars.Var{Name: "NO_COLOR", Means: "set to anything but the empty string: no colour (run --color always still colours)"})
}

// manSeeAlso are the pages SEE ALSO names: only those Slurm and MPI
// install (integration/man_test.go looks each up with man -w).
var manSeeAlso = []struct{ name, section string }{{"sbatch", "1"}, {"srun", "1"}, {"salloc", "1"}, {"mpirun", "1"}}

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
