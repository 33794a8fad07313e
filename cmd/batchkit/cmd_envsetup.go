package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/flagvalues"
	"github.com/batchkit/batchkit/profile"
)

func envsetupCommand() *cli.Command {
	return &cli.Command{
		Name:  "envsetup",
		Usage: "source a profile's environment scripts (oneAPI setvars.sh ...) and print what they change",
		Description: `Sources the profile's [env] source scripts, then each --source script, in order, in one real
bash (bash --noprofile --norc, stdin /dev/null, the current environment), and prints the variables
they set, changed or removed; then the profile's [env] variables over them, except those you have
exported already (yours win, as in the batch script). The scripts' own output is not printed.
Nothing is printed when a script is missing, fails (non-zero), exits the shell or runs past
--timeout (its process group is killed): one line says which, with its exit code and last output.

--source takes a script and its arguments as one value, split at spaces:
   --source '/opt/intel/oneapi/setvars.sh --force --config=/home/me/oneapi.cfg'
(a path or argument with spaces belongs in a profile: [env] source = [{script = ..., args = [...]}]).

Repeated PATH entries (PATH and every *PATH variable) that scripts add are removed, so sourcing
again in the environment printed changes nothing (oneAPI's setvars.sh --force prepends again).
The profile's [slurm] modules are not loaded: load them first.

Formats:
   shell  'unset NAME' and 'export NAME=value' lines, values single-quoted, for eval
   json   {"set": {"NAME": "value", ...}, "unset": ["NAME", ...]}

Exit status: 0; 1 when a script fails or times out; 2 on bad usage, a bad profile or a
missing or unreadable script.

Examples:
   eval "$(batchkit envsetup --profile intel-oneccl)"
   batchkit envsetup --source '/opt/intel/oneapi/setvars.sh --force' --format json`,
		Flags: []cli.Flag{
			flagvalues.With(&cli.StringFlag{Name: "profile", Usage: "site profile `NAME` or file whose [env] to set up (" + profileOrSource + ")"}, profileNames),
			&cli.GenericFlag{Name: "source", Value: &stringList{}, Usage: "`'FILE [ARGS...]'` to source after the profile's scripts (repeatable, in order)"},
			sourceTimeoutFlag("timeout", "time for all scripts together"),
			flagvalues.With(&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "shell", Usage: "shell or json"}, flagvalues.Keys(changesFormats)),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("envsetup takes no arguments, got %q (a script goes to --source)", c.Args().First())
			}
			write, ok := changesFormats[c.String("format")]
			if !ok {
				return usagef("invalid --format %q: want shell or json", c.String("format"))
			}
			extra, err := sourceFlags(*c.Generic("source").(*stringList))
			if err != nil {
				return err
			}
			env := profile.Env{}
			if c.IsSet("profile") || os.Getenv(envvars.Profile) != "" {
				r, err := loadProfile(c, nil)
				if err != nil {
					return err
				}
				env = r.Profile.Env
				if len(r.Profile.Slurm.Modules) > 0 {
					fmt.Fprintf(c.App.ErrWriter, "batchkit envsetup: profile %s's modules are not loaded here: module load them first\n", r.Name)
				}
			}
			ch, err := setUpEnv(c.Context, os.Environ(), env, extra, c.Duration("timeout"))
			if err != nil {
				return err
			}
			return write(ch, c.App.Writer)
		},
	}
}

// sourceTimeoutFlag is the time the scripts get, all together (envsetup's
// --timeout; run's, mpirun's and exec's --source-timeout): a positive
// duration, or exit 2 before anything runs.
func sourceTimeoutFlag(name, usage string) *cli.DurationFlag {
	return &cli.DurationFlag{Name: name, Value: envsetup.DefaultTimeout, Usage: usage,
		Action: func(_ *cli.Context, d time.Duration) error { return badInput(envsetup.CheckTimeout("--"+name, d)) }}
}

// sourceFlags parses --source values: a script path and its arguments,
// separated by spaces.
func sourceFlags(values []string) ([]envsetup.Script, error) {
	var out []envsetup.Script
	for _, v := range values {
		f := strings.Fields(v)
		if len(f) == 0 {
			return nil, usagef("invalid --source %q: want 'FILE [ARGS...]'", v)
		}
		out = append(out, envsetup.Script{Path: f[0], Args: f[1:]})
	}
	return out, nil
}

// setUpEnv is what a rank's environment gets from a profile, relative to
// environ: its source scripts then extra ones, sourced by real bash, then
// its variables (the user's exported values winning).
func setUpEnv(ctx context.Context, environ []string, env profile.Env, extra []envsetup.Script, timeout time.Duration) (envsetup.Changes, error) {
	sourced, err := sourceEnv(ctx, environ, env, timeout, extra...)
	if err != nil {
		return envsetup.Changes{}, err
	}
	return envsetup.WithVars(environ, sourced, env.Vars), nil
}

// sourceEnv sources env's set-up, then extra scripts, in one real bash
// started with environ (the edge: the rest of a rank's environment is
// envsetup's pure functions). A wheels prefix without the wheels is bad
// input, checked first: it is the cause to name, not what a script then
// fails at.
func sourceEnv(ctx context.Context, environ []string, env profile.Env, timeout time.Duration, extra ...envsetup.Script) (envsetup.Changes, error) {
	s, err := env.Setup(environ, extra...)
	if err != nil {
		return envsetup.Changes{}, badInput(err)
	}
	changes, err := s.Source(ctx, environ, timeout)
	if err != nil {
		return envsetup.Changes{}, sourceFailure(err)
	}
	return changes, nil
}

// sourceFailure maps a script that cannot be read to bad input (exit 2);
// one that fails or hangs stays a runtime failure (exit 1).
func sourceFailure(err error) error {
	var se *envsetup.SourceError
	if errors.As(err, &se) && se.Code == -1 && !errors.Is(err, envsetup.ErrTimeout) || errors.Is(err, envsetup.ErrNoBindings) {
		return badInput(err)
	}
	return err
}

// applyToProcess makes changes this process's environment, so that what
// runs next (the launcher's lookup on PATH, its --version probe, the
// program exec'd) sees it as after sourcing in a shell.
func applyToProcess(ch envsetup.Changes) error {
	for _, k := range ch.Unset {
		if err := os.Unsetenv(k); err != nil {
			return err
		}
	}
	for k, v := range ch.Set {
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("setting %s: %w", k, err)
		}
	}
	return nil
}

var changesFormats = map[string]func(envsetup.Changes, io.Writer) error{
	"shell": envsetup.Changes.WriteShell,
	"json":  envsetup.Changes.WriteJSON,
}

// sourceLines are the shell lines that source env's set-up, for --dry-run.
func sourceLines(env profile.Env) (string, error) {
	s, err := env.Setup(os.Environ())
	if err != nil {
		return "", err
	}
	return s.Shell()
}
