package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/internal/flagvalues"
	"github.com/batchkit/batchkit/internal/freeport"
	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/launch/failfast"
	"github.com/batchkit/batchkit/launch/mpilaunch"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/profile"
)

// stringList is a repeatable string flag that, unlike cli.StringSliceFlag,
// never splits a value on commas: --env K=a,b is one variable.
type stringList []string

func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }
func (l *stringList) String() string     { return strings.Join(*l, " ") }

func mpirunCommand() *cli.Command {
	return &cli.Command{
		Name:      "mpirun",
		Usage:     "launch a program on MPI ranks with the torchrun contract set on every rank",
		ArgsUsage: "[--] CMD [ARGS...]",
		Description: `Builds the command line of the MPI launcher of the chosen flavor (Open MPI, MPICH, Intel MPI,
MVAPICH2) or of srun, and runs CMD on every rank as 'batchkit exec -- CMD ARGS...', so each rank
gets RANK, WORLD_SIZE, LOCAL_RANK ... and all ranks agree on MASTER_ADDR (the first host, 127.0.0.1
when all ranks are local) and MASTER_PORT (derived from the Slurm job id inside an allocation, a
free local port outside one; --master-port overrides).

Hosts come from --hosts, --hostfile (Open MPI, Hydra or plain format: converted when the launcher
reads another), or the Slurm allocation (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE). Without
--flavor the flavor is read from --mpirun's name or --version output, else the first of
mpirun.openmpi, mpirun.mpich, mpirun (asked for --version) ... on PATH.

With --profile (or $BATCHKIT_PROFILE) the site profile's [mpi] settings are the defaults under
these flags; a --flavor or --launcher other than the profile's drops its binary, args and bootstrap.
A profile's bootstrap through Slurm (Hydra -bootstrap slurm) applies only inside an allocation.
The profile's [env] source scripts (oneAPI setvars.sh, oneCCL vars.sh) are sourced once, by real
bash, before the launcher is looked up on the PATH they set; the launcher and the ranks run in the
resulting environment (see 'batchkit envsetup'). --dry-run sources nothing: it prints them as
'source' lines before the command. The profile's [env] variables reach every rank like --env
(which wins).

Every rank gets BATCHKIT_JOB_TOKEN (kept if set, else new) via the launcher's environment, never argv (mpirun_rsh: none).

A rank that fails ends the job: Open MPI's mpirun and srun (SLURM_KILL_BAD_EXIT=1) stop the other
ranks, and under Hydra every rank's batchkit exec watches the others (see 'batchkit exec').
--no-fail-fast gives the launcher its own behaviour back (Hydra lets the others run on);
--fail-fast has batchkit exec watch under any launcher.

--dry-run --format json prints the launch as one JSON object on one line: argv, env (every rank's
variables), forward_env (names the launcher passes from its own environment), hostfile (path and
text of a generated one), setup (bash lines to source first), flavor, launcher and np.

The launcher's exit status is the exit status; SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR1 are forwarded
to it (a Ctrl-C or Ctrl-\ at the terminal reaches it directly, and is not sent twice).

Examples:
   batchkit mpirun -n 4 -- python3 train.py --epochs 3
   batchkit mpirun --flavor intelmpi --hosts node1,node2 --ppn 2 -- python3 train.py
   batchkit mpirun --flavor openmpi --hostfile hosts.txt --env NCCL_DEBUG=INFO -- python3 train.py
   batchkit mpirun --launcher srun -n 8 --ppn 4 -- python3 train.py   # inside sbatch
   batchkit mpirun --profile intel-oneccl -n 8 --ppn 4 -- python3 train.py
   batchkit mpirun --dry-run --flavor mpich -n 2 -- python3 train.py
   batchkit mpirun --dry-run --format json --flavor mpich -n 2 -- python3 train.py
   batchkit mpirun --flavor mpich --no-fail-fast -n 4 -- python3 train.py   # Hydra's own behaviour`,
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "np", Aliases: []string{"n"}, Usage: "number of ranks (default: --ppn times the hosts, or the hosts' slots, or the allocation's tasks)"},
			&cli.IntFlag{Name: "ppn", Usage: "ranks per node (wins over per-host slots)"},
			&cli.StringFlag{Name: "hosts", Usage: "comma-separated hosts or Slurm hostlists (node[1-4]), each optionally with :SLOTS for each of its hosts"},
			&cli.StringFlag{Name: "hostfile", Usage: "hostfile: `host slots=N`, `host:N` or `host` lines"},
			flagvalues.With(&cli.StringFlag{Name: "profile", Usage: "site profile `NAME` or file for the defaults below (" + profileOrDetect + ")"}, profileNames),
			flagvalues.With(&cli.StringFlag{Name: "flavor", Usage: "MPI flavor: openmpi, mpich, intelmpi or mvapich"}, flagvalues.List(mpirun.Flavors)),
			&cli.StringFlag{Name: "mpirun", Usage: "launcher binary (`PATH` or name on PATH)"},
			flagvalues.With(&cli.StringFlag{Name: "launcher", Usage: "mpirun, mpiexec or srun (default mpirun)"}, flagvalues.List(mpirun.Programs)),
			&cli.GenericFlag{Name: "env", Value: &stringList{}, Usage: "`K=V` exported to every rank (repeatable; not RANK, WORLD_SIZE ..., which batchkit exec sets per rank)"},
			&cli.GenericFlag{Name: "mpi-arg", Value: &stringList{}, Usage: "`ARG` passed to the launcher as is (repeatable)"},
			&cli.BoolFlag{Name: "allow-run-as-root", Usage: "Open MPI: --allow-run-as-root"},
			&cli.BoolFlag{Name: "oversubscribe", Usage: "Open MPI: --oversubscribe"},
			&cli.BoolFlag{Name: "no-host-check", Usage: "launch over ssh even to --hosts/--hostfile names that do not resolve here (ssh Host aliases)"},
			&cli.StringFlag{Name: "bootstrap", Usage: "Hydra -bootstrap / Open MPI --mca plm / mpirun_rsh -launcher (default slurm for Hydra in an allocation)"},
			&cli.StringFlag{Name: "srun-mpi", Usage: "srun --mpi plugin (default: pmix for Open MPI, pmi2 otherwise)"},
			&cli.IntFlag{Name: "master-port", Usage: "MASTER_PORT for all ranks"},
			sourceTimeoutFlag("source-timeout", "time for the profile's source scripts"),
			&cli.DurationFlag{Name: "probe-timeout", Value: mpilaunch.DefaultProbeTimeout, Usage: "time for a launcher's answer to --version (asked for its flavor)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the command, shell-quoted, instead of running it"},
			flagvalues.With(&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "text", Usage: "--dry-run's output: text (shell lines) or json (one line: argv, env, forward_env, hostfile, setup ...)"}, flagvalues.List(outputFormats)),
		}, failFastFlags()...),
		Action: mpirunAction,
	}
}

func mpirunAction(c *cli.Context) error {
	asJSON, err := wantJSON(c)
	if err != nil {
		return err
	}
	if asJSON && !c.Bool("dry-run") {
		return usagef("--format json is for --dry-run, which prints the command; a run's output is the program's")
	}
	defaults, penv, err := mpirunDefaults(c)
	if err != nil {
		return err
	}
	o, err := mpirunOptionsFrom(c, defaults)
	if err != nil {
		return err
	}
	o.ProfileEnv = launch.WithSrunLibs(o.ProfileEnv, o.Flavor, o.Launcher, o.SrunMPI)
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the batchkit binary: %w", err)
	}
	if !c.Bool("dry-run") {
		if _, err := sourceOnce(c, penv); err != nil {
			return err
		}
	}
	m := mpilaunch.Machine{Getenv: os.Getenv, Probe: mpilaunch.SystemProbe(c.Duration("probe-timeout")), ReadFile: mpilaunch.ReadHostfile, Self: self, FreePort: freePort,
		DryRun: c.Bool("dry-run")}
	if !c.Bool("dry-run") { // a dry run may be for hosts this machine does not know
		m.Resolve = mpilaunch.ResolveHost
	}
	p, err := mpilaunch.NewPlan(o, m)
	if err != nil {
		return launchExit(1, err)
	}
	if c.Bool("dry-run") {
		return printPlan(c.App.Writer, penv, p, asJSON)
	}
	stdin := c.App.Reader
	if stdin == nil {
		stdin = os.Stdin
	}
	sigs, stop := catchSignals()
	defer stop()
	return launchExit(mpilaunch.Run(c.Context, p, launch.IO{Stdin: stdin, Stdout: c.App.Writer, Stderr: c.App.ErrWriter}, sigs))
}

// lookupIn looks names up in environ: the user's environment as it was
// before sourceOnce changed this process's, so that a variable a script
// set does not pass for one the user exported (which would win over the
// profile's value; envsetup/rank.go's layers 2 to 4).
func lookupIn(environ []string) func(string) (string, bool) {
	m := envsetup.Environ(environ)
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// sourceOnce sources the profile's scripts into this process before the
// launcher is looked up on the PATH they set, and returns their changes;
// the ranks inherit the result through the launcher, so nothing is
// sourced per rank. The profile's variables go by the launcher (-genv),
// not here.
func sourceOnce(c *cli.Context, env profile.Env) (envsetup.Changes, error) {
	if len(env.Source) == 0 && !env.OneCCLBindings && env.IntelWheels == "" {
		return envsetup.Changes{}, nil
	}
	sourced, err := sourceEnv(c.Context, os.Environ(), env, c.Duration("source-timeout"))
	if err != nil {
		return envsetup.Changes{}, err
	}
	return sourced, applyToProcess(sourced)
}

// printPlan prints the dry run: the profile's scripts as 'source' lines,
// then the launcher's command line; or, asJSON, the launch as one line.
func printPlan(w io.Writer, penv profile.Env, p mpilaunch.Plan, asJSON bool) error {
	setup, err := sourceLines(penv)
	if err != nil {
		return badInput(err)
	}
	if !asJSON {
		err = mpilaunch.WriteDryRun(w, p, setup)
	} else if out, derr := mpilaunch.DryRun(p, setup); derr != nil {
		err = derr
	} else {
		err = writeJSONLine(w, out)
	}
	if errors.Is(err, launch.ErrInvalid) {
		return badInput(err)
	}
	return err
}

// freePort finds a TCP port free on every interface (ranks on other nodes
// connect to it), below the ephemeral range where outgoing connections
// could take it before rank 0 listens.
func freePort() (int, error) { return freeport.BelowEphemeral("") }

func failFastFlags() []cli.Flag {
	flags := make([]cli.Flag, len(failfast.Switches))
	for i, s := range failfast.Switches {
		flags[i] = &cli.BoolFlag{Name: s.Flag, Usage: s.Usage}
	}
	return flags
}

// failFastFrom is the BATCHKIT_FAIL_FAST value the fail-fast flags give
// every rank (failfast.Choose), "" when neither is given.
func failFastFrom(c *cli.Context, env []string) (string, error) {
	v, err := failfast.Choose(c.Bool, env)
	return v, badInput(err)
}
