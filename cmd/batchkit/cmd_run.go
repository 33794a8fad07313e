package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/internal/flagvalues"
	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/launch/local"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run N ranks of a program on this machine with the torchrun contract set",
		ArgsUsage: "-n N [--] CMD [ARGS...]",
		Description: `Starts N ranks of CMD on this machine, each with RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, NODE_RANK=0, GROUP_RANK=0, GROUP_WORLD_SIZE=1, MASTER_ADDR=127.0.0.1 and
MASTER_PORT (a free port unless --master-port) set on top of the inherited environment, plus
BATCHKIT_JOB_TOKEN, a random secret shared by the ranks (kept if already set, except in restarts).

With --profile the site profile's [env] scripts (oneAPI setvars.sh ...) are sourced once, by real
bash, before CMD is looked up on the PATH they set, and every rank gets their changes and the
profile's variables; a variable you exported keeps your value (as under batchkit exec --profile).
Per-rank pinning is not done here.

Each output line is prefixed with its rank, "[3] ...": stdout to stdout, stderr to stderr.
SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to every rank's process group. When a rank exits non-zero
or is killed, the others get SIGTERM, then SIGKILL after --grace, and batchkit exits with
the failing rank's code (128+S for a rank killed by signal S). If batchkit itself is
killed with SIGKILL, which it cannot catch, each rank gets SIGKILL too (Linux), but what
a rank started in the background is left running.

--max-restarts N (torchrun's): when a rank exits non-zero or is killed, the others are
stopped and all ranks started again, up to N times, after a wait of 1 s that doubles for
each next restart up to 30 s (a signal meanwhile ends the run), each time with a new MASTER_PORT
(unless --master-port) and a new BATCHKIT_JOB_TOKEN; TORCHELASTIC_RESTART_COUNT and
TORCHELASTIC_MAX_RESTARTS tell the ranks which attempt this is. Not restarted: a stop you
asked for (a signal to batchkit), and a first failing rank that exited 75 (stopped on
purpose: batchkit train preempted after a checkpoint) or 2 (a usage error, which would
repeat). batchkit train with --checkpoint-dir resumes where the last checkpoint left off.

Examples:
   batchkit run -n 4 -- python3 train.py --epochs 3
   batchkit run -n 2 --max-restarts 3 -- batchkit train --checkpoint-dir ckpt
   batchkit run -n 2 --tee logs -- sh -c 'echo rank $RANK of $WORLD_SIZE'`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "n", Aliases: []string{"nproc"}, Usage: "number of ranks, at least 1 (required)", DefaultText: "none"},
			&cli.IntFlag{Name: "master-port", Usage: "MASTER_PORT for the ranks", DefaultText: "a free port on 127.0.0.1"},
			&cli.StringFlag{Name: "color", Value: "auto", Usage: "colour the rank prefixes: auto (on a terminal, unless NO_COLOR is set), always or never"},
			&cli.StringFlag{Name: "tee", Usage: "also write each rank's output, unprefixed, to `DIR`/rank-N.log (never overwritten)"},
			&cli.DurationFlag{Name: "grace", Value: local.DefaultGrace, Usage: "time between SIGTERM and SIGKILL when stopping ranks"},
			&cli.IntFlag{Name: "max-restarts", Usage: "start all ranks again up to `N` times after a rank failed"},
			flagvalues.With(&cli.StringFlag{Name: "profile", Usage: "site profile `NAME` or file whose [env] scripts are sourced once and whose variables every rank gets, the user's values winning (" + profileOnlyFlag + ")"}, profileNames),
			sourceTimeoutFlag("source-timeout", "time for the profile's source scripts"),
		},
		Action: runAction,
	}
}

func runAction(c *cli.Context) error {
	o, err := runOptions(c)
	if err != nil {
		return err
	}
	if o.Env, o.Profile, err = runProfile(c); err != nil {
		return err
	}
	p, err := local.NewPlan(o)
	if err != nil {
		return launchExit(1, err)
	}
	sigs, stop := catchSignals()
	defer stop()
	code, err := local.Run(c.Context, p, launch.IO{Stdout: c.App.Writer, Stderr: c.App.ErrWriter}, sigs)
	if err != nil && !errors.Is(err, launch.ErrInvalid) {
		err = fmt.Errorf("run: %w", err)
	}
	return launchExit(code, err)
}

// runOptions reads the flags, checking each.
func runOptions(c *cli.Context) (local.Options, error) {
	args := c.Args().Slice()
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	switch {
	case !c.IsSet("n"):
		return local.Options{}, usagef("run needs the number of ranks: batchkit run -n N -- CMD [ARGS...]")
	case c.Int("n") < 1:
		return local.Options{}, usagef("invalid -n %d: need at least 1 rank", c.Int("n"))
	case len(args) == 0:
		return local.Options{}, usagef("run needs a command: batchkit run -n N -- CMD [ARGS...]")
	case c.IsSet("master-port") && (c.Int("master-port") < 1 || c.Int("master-port") > 65535):
		return local.Options{}, usagef("invalid --master-port %d: want 1-65535", c.Int("master-port"))
	case c.Duration("grace") < 0:
		return local.Options{}, usagef("invalid --grace %v: must not be negative", c.Duration("grace"))
	case c.Int("max-restarts") < 0:
		return local.Options{}, usagef("invalid --max-restarts %d: must not be negative", c.Int("max-restarts"))
	}
	colorOut, colorErr, err := colors(c.String("color"), c.App.Writer, c.App.ErrWriter, os.Getenv)
	if err != nil {
		return local.Options{}, err
	}
	return local.Options{
		N: c.Int("n"), Cmd: args[0], Args: args[1:],
		ColorStdout: colorOut, ColorStderr: colorErr,
		TeeDir: c.String("tee"), Grace: c.Duration("grace"),
		MasterPort: c.Int("master-port"), MaxRestarts: c.Int("max-restarts"),
	}, nil
}

// runProfile sources --profile's scripts once into this process, so that
// CMD is looked up on the PATH they set, as batchkit mpirun does; the ranks get the scripts' changes and the profile's
// variables through envsetup.RankEnv, over the environment from before
// (nil: no profile, the ranks inherit this process's).
func runProfile(c *cli.Context) ([]string, local.Profile, error) {
	if !c.IsSet("profile") {
		return nil, local.Profile{}, nil
	}
	r, err := loadProfile(c, nil)
	if err != nil {
		return nil, local.Profile{}, err
	}
	environ := os.Environ() // before sourcing: what is in it is the user's
	sourced, err := sourceOnce(c, r.Profile.Env)
	if err != nil {
		return nil, local.Profile{}, err
	}
	return environ, local.Profile{Sourced: sourced, Vars: r.Profile.Env.Vars}, nil
}

// colors decides, for --color, whether to colour the prefixes on stdout and
// on stderr: auto colours a stream only when it is a terminal and NO_COLOR
// is not set (useColor).
func colors(mode string, stdout, stderr io.Writer, getenv func(string) string) (bool, bool, error) {
	switch mode {
	case "always":
		return true, true, nil
	case "never":
		return false, false, nil
	case "auto":
		return useColor(stdout, getenv), useColor(stderr, getenv), nil
	}
	return false, false, usagef("invalid --color %q: want auto, always or never", mode)
}
