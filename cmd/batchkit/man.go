package main

import (
	"github.com/urfave/cli/v2"

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
// statuses (exitStatuses) and environment.
func manPage(app *cli.App) []byte {
	p := clitree.ManPage{Environment: manEnvironment,
		SeeAlso: "**sbatch**(1), **srun**(1), **mpirun**(1), **torchrun**(1); the README and docs/ of batchkit."}
	for _, e := range exitStatuses {
		p.ExitStatuses = append(p.ExitStatuses, [3]string{e.Status, e.Meaning, e.From})
	}
	return p.Render(app)
}

// manEnvironment is what batchkit itself reads, beyond the launchers'
// variables that 'batchkit env' documents.
var manEnvironment = [][2]string{
	{"BATCHKIT_PROFILE", "the site profile used when a command gets no --profile (default local)"},
	{"BATCHKIT_PROFILE_PATH", "colon-separated directories searched for NAME.toml before ~/.config/batchkit/profiles and /etc/batchkit/profiles"},
	{"NO_COLOR", "set to anything but the empty string: no colour (run --color always still colours)"},
}
