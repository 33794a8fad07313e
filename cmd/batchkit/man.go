package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/clitree"
)

// The man page is generated from the command tree (make man: 'batchkit
// man' > man/batchkit.1) by clitree, so it says what --help says; what the
// tree does not hold is here.

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

// manPage renders app as roff, man section 1, with batchkit's exit
// statuses (exitStatuses), environment (manEnvironment) and the pages it
// refers to (manSeeAlso).
func manPage(app *cli.App) []byte {
	p := clitree.ManPage{}
	for _, e := range exitStatuses {
		p.ExitStatuses = append(p.ExitStatuses, [3]string{e.Status, e.Meaning, e.From})
	}
	for _, e := range manEnvironment() {
		p.Environment = append(p.Environment, [2]string{e.Name, e.Means})
	}
	var see []string
	for _, s := range manSeeAlso {
		see = append(see, fmt.Sprintf("**%s**(%s)", s.name, s.section))
	}
	p.SeeAlso = strings.Join(see, ", ") + "; the README and docs/ of batchkit."
	return p.Render(app)
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
