package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/BurntSushi/toml"
	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/launch/sbatch"
	"github.com/batchkit/batchkit/profile"
	"github.com/batchkit/batchkit/templates"
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
			rows := profileRows(entries)
			if asJSON {
				return writeJSONLine(c.App.Writer, rows)
			}
			return writeProfileList(c.App.Writer, rows)
		},
	}
}

// profileRow is one profile of 'profile list'; the JSON keys are the
// interface for scripts.
type profileRow struct {
	Name        string   `json:"name"`
	Source      string   `json:"source"` // a path, or embedded:NAME.toml
	Shadowed    bool     `json:"shadowed"`
	Description string   `json:"description"`
	Problems    []string `json:"problems"` // an invalid profile's, one a line of profile check
}

func profileRows(entries []profile.Entry) []profileRow {
	rows := make([]profileRow, len(entries))
	for i, e := range entries {
		rows[i] = profileRow{Name: e.Name, Source: e.Path, Shadowed: e.Shadowed, Description: e.Description, Problems: []string{}}
		for _, p := range profile.Problems(e.Err) {
			rows[i].Problems = append(rows[i].Problems, p.Error())
		}
	}
	return rows
}

func writeProfileList(w io.Writer, rows []profileRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tDESCRIPTION")
	for _, r := range rows {
		src := r.Source
		if r.Shadowed {
			src += " (shadowed)"
		}
		desc := r.Description
		if n := len(r.Problems); n > 0 {
			desc = fmt.Sprintf("(invalid: %d %s; batchkit profile check %s)", n, plural(n, "problem"), r.Source)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, src, desc)
	}
	return tw.Flush()
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
	r, err := profile.NewLoader(os.Getenv).Resolve(name)
	if err != nil {
		return nil, badInput(err)
	}
	for _, kv := range sets.kv {
		k, v, _ := strings.Cut(kv, "=")
		if err := r.Set(k, v, profile.CommandLine); err != nil {
			return nil, badInput(err)
		}
	}
	if err := r.Validate(); err != nil {
		return nil, badInput(err)
	}
	return r, nil
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
			w := c.App.Writer
			fmt.Fprintf(w, "# profile %s from %s\n", templates.Comment(r.Name), templates.Comment(r.Path))
			for _, f := range r.Chain[1:] {
				fmt.Fprintf(w, "# extends %s from %s\n", templates.Comment(f.Name), templates.Comment(f.Path))
			}
			fmt.Fprintln(w)
			return r.WriteTOML(w)
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
			if asJSON {
				return writeExplainJSON(c.App.Writer, r)
			}
			return writeExplain(c.App.Writer, r)
		},
	}
}

func writeExplain(w io.Writer, r *profile.Resolved) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tFROM\tVALUE")
	for _, s := range r.Settings() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Key, s.Origin, s.Value)
	}
	return tw.Flush()
}

// explainRow is one value of 'profile explain --format json'.
type explainRow struct {
	Key   string `json:"key"`
	From  string `json:"from"`
	Value any    `json:"value"`
}

func writeExplainJSON(w io.Writer, r *profile.Resolved) error {
	rows := []explainRow{}
	for _, s := range r.Settings() {
		v, err := tomlValue(s.Value)
		if err != nil {
			return fmt.Errorf("profile explain: %s: %w", s.Key, err)
		}
		rows = append(rows, explainRow{Key: s.Key, From: s.Origin.String(), Value: v})
	}
	return writeJSONLine(w, rows)
}

// tomlValue decodes a Setting's value, which is TOML, to what JSON writes.
func tomlValue(text string) (any, error) {
	var doc struct{ V any }
	if _, err := toml.Decode("V = "+text, &doc); err != nil {
		return nil, err
	}
	return doc.V, nil
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
			rows := checkProfiles(profile.NewLoader(os.Getenv), c.Args().Slice())
			if asJSON {
				err = writeJSONLine(c.App.Writer, rows)
			} else {
				writeCheckText(c.App.Writer, c.App.ErrWriter, rows)
			}
			if err != nil {
				return err
			}
			return checkSummary(rows)
		},
	}
}

// checkedProfile is one argument of 'profile check'; the JSON keys are the
// interface for scripts.
type checkedProfile struct {
	File     string   `json:"file"`
	OK       bool     `json:"ok"`
	Note     string   `json:"note"` // why something was not checked
	Problems []string `json:"problems"`
	fresh    []error  // the problems not said for an argument before (profile.Said)
}

// checkProfiles resolves each argument and checks its templates; a base's
// problems are fresh once, not once per profile extending it.
func checkProfiles(loader *profile.Loader, args []string) []checkedProfile {
	said := profile.Said{}
	rows := make([]checkedProfile, len(args))
	for i, arg := range args {
		rows[i] = checkedProfile{File: arg, OK: true, Problems: []string{}}
		r, err := loader.Resolve(arg)
		if err == nil {
			var note string
			note, err = checkTemplates(r)
			rows[i].Note = strings.TrimSuffix(strings.TrimPrefix(note, " ("), ")")
		}
		if err == nil {
			continue
		}
		rows[i].OK = false
		for _, p := range profile.Problems(err) {
			rows[i].Problems = append(rows[i].Problems, p.Error())
		}
		rows[i].fresh = said.Fresh(err)
	}
	return rows
}

// writeCheckText prints "FILE: ok" on stdout, each fresh problem on
// stderr.
func writeCheckText(stdout, stderr io.Writer, rows []checkedProfile) {
	for _, r := range rows {
		switch {
		case r.OK && r.Note != "":
			fmt.Fprintf(stdout, "%s: ok (%s)\n", r.File, r.Note)
		case r.OK:
			fmt.Fprintf(stdout, "%s: ok\n", r.File)
		case len(r.fresh) == 0:
			fmt.Fprintf(stderr, "%s: not ok: its problems are above\n", r.File)
		}
		for _, e := range r.fresh {
			fmt.Fprintln(stderr, e)
		}
	}
}

// checkSummary is the exit of 'profile check': a usage error counting the
// distinct problems when any profile has one.
func checkSummary(rows []checkedProfile) error {
	var nBad, nProblems int
	for _, r := range rows {
		if !r.OK {
			nBad++
		}
		nProblems += len(r.fresh)
	}
	if nBad == 0 {
		return nil
	}
	return badInput(fmt.Errorf("%d %s in %d of %d %s", nProblems, plural(nProblems, "problem"),
		nBad, len(rows), plural(len(rows), "profile")))
}

// checkTemplates loads the profile's template directory as sbatch would
// and renders its templates with sample scripts (sbatch.Samples), which
// finds what loading cannot: a field the script lacks. The directory need
// exist only where jobs are submitted: a missing one gets a note that it
// was not checked; one that is a file or a FIFO is an error, from Load.
func checkTemplates(r *profile.Resolved) (note string, err error) {
	dir := r.Profile.Templates
	if dir == "" {
		return "", nil
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf(" (templates %s is not on this machine: not checked)", dir), nil
	}
	set, err := templates.Load(dir)
	if err == nil {
		err = set.Check(sbatch.Samples())
	}
	if err != nil {
		o, _ := r.Origin("templates")
		return "", &profile.Problem{File: o.Source, Line: o.Line, Col: o.Col, Msg: "templates: " + err.Error()}
	}
	return "", nil
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
