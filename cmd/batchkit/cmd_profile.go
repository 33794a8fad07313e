package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/launch/sbatch"
	"github.com/batchkit/batchkit/profile"
	"github.com/batchkit/batchkit/profile/report"
)

func profileCommand() *cli.Command {
	return &cli.Command{
		Name:  "profile",
		Usage: "list, show, explain and check site profiles",
		Description: `A profile describes a site: Slurm defaults, the MPI flavor and launcher, the environment to
set up (scripts to source, variables) and rendezvous defaults. NAME.toml is searched in each
directory of $BATCHKIT_PROFILE_PATH (colon-separated), then ~/.config/batchkit/profiles, then
/etc/batchkit/profiles, then the profiles built into batchkit (local, generic-openmpi,
intel-oneccl, mpich). A NAME containing / or ending in .toml is a file path. Without NAME: ` +
			strings.TrimPrefix(profileOrLocal, "default: ") + `. The schema is in site-configs/README.md.

Examples:
   batchkit profile list
   batchkit profile show intel-oneccl
   batchkit profile explain --set slurm.partition=gpu
   batchkit profile check /etc/batchkit/profiles/*.toml`,
		Subcommands: []*cli.Command{
			profileListCommand(),
			profileShowCommand(),
			profileExplainCommand(),
			profileCheckCommand(),
		},
	}
}

func profileListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the profiles in the search path, where each comes from, and which are shadowed",
		Description: `A profile found earlier in the search path shadows those of the same name after it;
'batchkit profile list' marks those (shadowed).

With --format json: an array of objects with the keys name, source, shadowed, description and
problems (an invalid profile's, as profile check prints them; [] for a valid one).

Examples:
   batchkit profile list
   BATCHKIT_PROFILE_PATH=$HOME/profiles batchkit profile list
   batchkit profile list --format json | jq -r '.[] | select(.shadowed | not) | .name'`,
		Flags: []cli.Flag{formatFlag()},
		Action: func(c *cli.Context) error {
			asJSON, err := jsonNoArgs(c)
			if err != nil {
				return err
			}
			entries, err := profile.NewLoader(os.Getenv).List()
			if err != nil {
				return badInput(err)
			}
			rows := report.List(entries)
			if asJSON {
				return writeJSONLine(c.App.Writer, rows)
			}
			return report.WriteList(c.App.Writer, rows)
		},
	}
}

// setFlag collects --set KEY=VALUE flags verbatim (a StringSliceFlag would
// split VALUE at commas).
type setFlag struct{ kv []string }

func (s *setFlag) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	s.kv = append(s.kv, v)
	return nil
}

func (s *setFlag) String() string { return strings.Join(s.kv, " ") }

func setFlagOf(sets *setFlag) cli.Flag {
	return &cli.GenericFlag{
		Name:  "set",
		Usage: "override a key as a command-line flag would, e.g. --set slurm.partition=gpu (repeatable; a list comma-separated, or as TOML when an element holds a comma: --set 'mpi.args=[\"--mca\", \"a,b\"]')",
		Value: sets,
	}
}

// resolveProfile resolves the profile named by the first argument (or the
// default) and puts the --set overrides on top.
func resolveProfile(c *cli.Context, sets *setFlag) (*profile.Resolved, error) {
	if c.NArg() > 1 {
		if strings.HasPrefix(c.Args().Get(1), "-") {
			return nil, usagef("%s: flags go before the profile: %s %s %s", c.Command.HelpName,
				c.Command.HelpName, strings.Join(c.Args().Slice()[1:], " "), c.Args().First())
		}
		return nil, usagef("%s takes at most one profile, got %d arguments", c.Command.HelpName, c.NArg())
	}
	name := c.Args().First()
	if name == "" {
		name = profile.DefaultName(os.Getenv)
	}
	r, err := profile.NewLoader(os.Getenv).ResolveWith(name, sets.kv)
	return r, badInput(err)
}

func profileShowCommand() *cli.Command {
	sets := &setFlag{}
	return &cli.Command{
		Name:      "show",
		Usage:     "print a profile merged with the profiles it extends, as TOML",
		ArgsUsage: "[NAME|PATH]",
		Description: `The output is itself a valid profile with every value set, defaults included.

Examples:
   batchkit profile show
   batchkit profile show intel-oneccl
   batchkit profile show --set mpi.launcher=srun ./mysite.toml`,
		Flags: []cli.Flag{setFlagOf(sets)},
		Action: func(c *cli.Context) error {
			r, err := resolveProfile(c, sets)
			if err != nil {
				return err
			}
			return report.WriteShow(c.App.Writer, r)
		},
	}
}

func profileExplainCommand() *cli.Command {
	sets := &setFlag{}
	return &cli.Command{
		Name:      "explain",
		Usage:     "print each value of a profile with the file, line and column it comes from",
		ArgsUsage: "[NAME|PATH]",
		Description: `Values come, lowest first, from the built-in defaults, the profile's base profiles
(extends = "NAME"), the profile itself and the command line (--set). A list from a higher
layer replaces the lower one; env.vars are merged variable by variable.

With --format json: an array of objects with the keys key, from (FILE:LINE:COL, or where else
the value comes from) and value (as JSON: a string, number, boolean or list).

Examples:
   batchkit profile explain
   batchkit profile explain --set slurm.partition=gpu ~/.config/batchkit/profiles/mine.toml
   batchkit profile explain --format json intel-oneccl | jq -r '.[] | select(.key == "mpi.flavor") | .from'`,
		Flags: []cli.Flag{setFlagOf(sets), formatFlag()},
		Action: func(c *cli.Context) error {
			asJSON, err := wantJSON(c)
			if err != nil {
				return err
			}
			r, err := resolveProfile(c, sets)
			if err != nil {
				return err
			}
			if !asJSON {
				return report.WriteExplain(c.App.Writer, r)
			}
			rows, err := report.Explain(r)
			if err != nil {
				return err
			}
			return writeJSONLine(c.App.Writer, rows)
		},
	}
}

func profileCheckCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "check profile files: syntax, keys, types, values, and the profiles they extend",
		ArgsUsage: "FILE...",
		Description: `Prints "FILE: ok" for each good profile and every problem of the others, one a line as
FILE:LINE:COL: message, on stderr; exit status 2 if there is any problem. A FILE may also be a
profile name.

With --format json: one array on stdout of objects with the keys file, ok, note and problems (all
of each profile's, those of a base it extends included); the exit status is the same.

Examples:
   batchkit profile check /etc/batchkit/profiles/*.toml
   BATCHKIT_PROFILE_PATH=. batchkit profile check mysite.toml
   batchkit profile check --format json site/*.toml | jq -r '.[] | select(.ok | not) | .file'`,
		Flags: []cli.Flag{formatFlag()},
		Action: func(c *cli.Context) error {
			asJSON, err := wantJSON(c)
			if err != nil {
				return err
			}
			if c.NArg() == 0 {
				return usagef("profile check needs profile files, e.g. batchkit profile check mysite.toml")
			}
			rows := report.Check(profile.NewLoader(os.Getenv), c.Args().Slice(), sbatch.CheckTemplates)
			if asJSON {
				err = writeJSONLine(c.App.Writer, rows)
			} else {
				report.WriteCheck(c.App.Writer, c.App.ErrWriter, rows)
			}
			if err != nil {
				return err
			}
			return badInput(report.CheckSummary(rows))
		},
	}
}
