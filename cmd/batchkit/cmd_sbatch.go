package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/internal/outfile"
	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/launch/sbatch"
)

func sbatchCommand() *cli.Command {
	return &cli.Command{
		Name:      "sbatch",
		Usage:     "write or submit a Slurm batch script that runs CMD in every rank",
		ArgsUsage: "[flags] -- CMD [ARGS...]",
		Description: `Builds a batch script from the site profile and the flags (named like sbatch's own):
#SBATCH directives, module loads, the profile's environment scripts and variables, then the
launch line — srun with the flavor's --mpi plugin, or the flavor's mpirun — running
'batchkit exec -- CMD ARGS...' in every rank so the program sees RANK, WORLD_SIZE, MASTER_ADDR ...

Without --dry-run or --write the script is submitted with 'sbatch --parsable' and the job id
printed (sbatch is killed if it has not answered within --submit-timeout); --wait waits for the job
and exits with its exit code (SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR1 go to sbatch meanwhile); a
job that failed gets a line with its state, reason, nodes and output file (scontrol show job), and
one cancelled before it started exits 1, not sbatch's 0. --write writes only a regular
file, or through a symbolic link to one: a device, FIFO, socket or directory is refused (exit 2)
and left alone. A file replaced with --force keeps its mode and owner; one whose owner cannot be
kept (someone else's, when not root) is refused.

The script survives SIGUSR1 and SIGTERM (--signal B:USR1@120, scancel --batch or --full) and
passes SIGUSR1 on to the launcher, which forwards it to the ranks. With --requeue (profile:
slurm.requeue) an exit 75 of CMD (it stopped on SIGUSR1 after a checkpoint, as batchkit train does)
requeues the job, and CMD must resume from its checkpoint when run again; without, 75 ends the job.
Never after a SIGTERM to the script: a plain scancel or the time limit ends the job. --requeue also
appends every run's output to the job's files (--open-mode=append), starts each run with a line
'batchkit: job J, run N', and sets BATCHKIT_REQUEUE=1 for the ranks.

A rank that fails ends the job (srun with SLURM_KILL_BAD_EXIT=1, Open MPI's mpirun, and under Hydra
the ranks' batchkit exec, which watch each other). --no-fail-fast puts BATCHKIT_FAIL_FAST=0 on the
launch line, giving the launcher its own behaviour back (Hydra lets the others run on);
--fail-fast puts BATCHKIT_FAIL_FAST=1, a watch under any launcher.

With --torchrun N every node runs one task, torchrun (the profile's env.python -m
torch.distributed.run) with N workers, its --nnodes, --node_rank, --master_addr and --master_port
from batchkit exec; CMD is torchrun's arguments: its own flags, then the script.

Examples:
   batchkit sbatch --dry-run -N 2 --ntasks-per-node 4 -t 1:00:00 -- python3 train.py
   batchkit sbatch --profile intel-oneccl -N 4 --ntasks-per-node 2 -J train -- python3 train.py --epochs 3
   batchkit sbatch --write job.sh --launcher srun -N 2 -- ./bench
   batchkit sbatch --wait -N 2 --ntasks-per-node 2 -o out.txt -- batchkit env
   batchkit sbatch --requeue --signal B:USR1@120 -N 2 -- batchkit train --checkpoint-dir ckpt
   batchkit sbatch --torchrun 2 --launcher srun -N 2 -- --redirects 1 --tee 1 train_ddp.py
   batchkit sbatch --flavor mpich --launcher mpirun --no-fail-fast -N 2 -- python3 train.py`,
		Flags:        append(append(profileFlags(), sbatchFlags()...), failFastFlags()...),
		Action:       sbatchAction,
		OnUsageError: sbatchUsageError,
	}
}

// sbatchFlags are sbatch's own options batchkit takes (named as sbatch
// names them), then its own.
func sbatchFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "nodes", Aliases: []string{"N"}, Usage: "number of nodes (N or MIN-MAX)"},
		&cli.IntFlag{Name: "ntasks", Aliases: []string{"n"}, Usage: "total number of tasks (ranks)"},
		&cli.IntFlag{Name: "ntasks-per-node", Usage: "tasks (ranks) per node"},
		&cli.IntFlag{Name: "cpus-per-task", Aliases: []string{"c"}, Usage: "CPUs per task"},
		&cli.StringFlag{Name: "gpus", Aliases: []string{"G"}, Usage: "GPUs for the job"},
		&cli.StringFlag{Name: "gpus-per-node", Usage: "GPUs on every node"},
		&cli.StringFlag{Name: "gpus-per-task", Usage: "GPUs for every task (rank)"},
		&cli.StringFlag{Name: "gres", Usage: "generic resources on every node, e.g. gpu:a100:4"},
		&cli.StringFlag{Name: "mem", Usage: "memory on every node, e.g. 64G"},
		&cli.StringFlag{Name: "mem-per-cpu", Usage: "memory for every CPU, e.g. 4G"},
		&cli.StringFlag{Name: "time", Aliases: []string{"t"}, Usage: "time limit (profile: slurm.time)"},
		&cli.StringFlag{Name: "partition", Aliases: []string{"p"}, Usage: "partition (profile: slurm.partition)"},
		&cli.StringFlag{Name: "account", Aliases: []string{"A"}, Usage: "account (profile: slurm.account)"},
		&cli.StringFlag{Name: "qos", Aliases: []string{"q"}, Usage: "quality of service (profile: slurm.qos)"},
		&cli.StringFlag{Name: "constraint", Aliases: []string{"C"}, Usage: "node features (profile: slurm.constraint)"},
		&cli.StringFlag{Name: "nodelist", Aliases: []string{"w"}, Usage: "nodes the job must have (a host list)"},
		&cli.StringFlag{Name: "exclude", Aliases: []string{"x"}, Usage: "nodes the job must not have (a host list)"},
		&cli.StringFlag{Name: "reservation", Usage: "reservation to run in"},
		&cli.StringFlag{Name: "job-name", Aliases: []string{"J"}, Usage: "job name"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "stdout file pattern"},
		&cli.StringFlag{Name: "error", Aliases: []string{"e"}, Usage: "stderr file pattern"},
		&cli.StringFlag{Name: "array", Aliases: []string{"a"}, Usage: "job array indexes"},
		&cli.BoolFlag{Name: "exclusive", Usage: "whole nodes"},
		&cli.StringFlag{Name: "signal", Usage: "signal before the time limit, e.g. USR1@120"},
		&cli.StringFlag{Name: "dependency", Aliases: []string{"d"}, Usage: "job dependencies"},
		&cli.StringFlag{Name: "chdir", Aliases: []string{"D"}, Usage: "working directory of the batch script"},
		&cli.StringFlag{Name: "mail-type", Usage: "mail on these events, e.g. END,FAIL"},
		&cli.StringFlag{Name: "mail-user", Usage: "address for --mail-type's mail"},
		&cli.IntFlag{Name: "torchrun", Usage: "one task per node running torchrun with `N` workers; CMD is torchrun's arguments"},
		&cli.BoolFlag{Name: "requeue", Usage: "requeue the job when CMD exits 75 (checkpointed on SIGUSR1; it must resume), never after a SIGTERM (scancel, time limit); --requeue=false overrides the profile (profile: slurm.requeue)"},
		// Not a StringSliceFlag: that splits at commas, and
		// --mail-type=END,FAIL is one directive.
		&cli.GenericFlag{Name: "sbatch-arg", Value: &stringList{}, Usage: "any other directive, e.g. --sbatch-arg=--hint=nomultithread (repeatable; not one of the options above)"},
		&cli.StringFlag{Name: "batchkit", Usage: "path of batchkit on the compute nodes (default: this binary)"},
		&cli.BoolFlag{Name: "dry-run", Usage: "print the script, submit nothing"},
		&cli.StringFlag{Name: "write", Usage: "write the script to `FILE` (a regular file, or a link to one), submit nothing"},
		&cli.BoolFlag{Name: "force", Usage: "let --write overwrite an existing file (its mode and owner are kept)"},
		&cli.BoolFlag{Name: "wait", Usage: "wait for the job and exit with its exit code"},
		&cli.DurationFlag{Name: "submit-timeout", Value: sbatch.DefaultSubmitTimeout, Usage: "time for sbatch to answer with a job id (without --wait)"},
	}
}

// programArgs returns CMD ARGS..., after an optional "--".
func programArgs(c *cli.Context, command string) ([]string, error) {
	args := c.Args().Slice()
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return nil, usagef("%s needs a command: batchkit %s [flags] -- CMD [ARGS...]", command, command)
	}
	return args, nil
}

func sbatchAction(c *cli.Context) error {
	program, err := programArgs(c, "sbatch")
	if err != nil {
		return err
	}
	// One of: print, write, submit (and wait).
	switch {
	case c.IsSet("write") && c.String("write") == "":
		return usagef("--write: empty file name")
	case c.Bool("dry-run") && c.IsSet("write"):
		return usagef("--dry-run and --write: choose one (--dry-run prints the script, --write saves it)")
	case c.Bool("wait") && (c.Bool("dry-run") || c.IsSet("write")):
		return usagef("--wait is for a submitted job: it has no effect with --dry-run or --write")
	case c.Bool("force") && !c.IsSet("write"):
		return usagef("--force is for --write: it lets it replace an existing file")
	case c.IsSet("submit-timeout") && (c.Bool("wait") || c.Bool("dry-run") || c.IsSet("write")):
		return usagef("--submit-timeout is for a submission without --wait")
	case c.Duration("submit-timeout") <= 0:
		return usagef("--submit-timeout %v: want a positive duration", c.Duration("submit-timeout"))
	}
	req, err := sbatchRequest(c, program)
	if err != nil {
		return err
	}
	p, err := sbatch.NewPlan(req)
	if err != nil {
		return launchExit(1, err)
	}
	switch {
	case c.Bool("dry-run"):
		_, err := fmt.Fprint(c.App.Writer, p.Text)
		return err
	case c.IsSet("write"):
		return writeNew(c.String("write"), p.Text, c.Bool("force"))
	}
	sigs, stop := catchSignals()
	defer stop()
	return launchExit(sbatch.Run(c.Context, p, launch.IO{Stdout: c.App.Writer, Stderr: c.App.ErrWriter}, sigs))
}

// writeNew writes a file that must not exist yet, unless force: a user's
// script is never overwritten by surprise, and a replaced one is swapped in
// whole, keeping its mode and owner. Only a regular file, or a link to one,
// is written: --write /dev/null --force must not replace the device
// (outfile.Write).
func writeNew(path, text string, force bool) error {
	err := outfile.Write(path, []byte(text), 0o755, force)
	var (
		nre *outfile.NotRegularError
		oe  *outfile.OwnerError
	)
	switch {
	case errors.As(err, &nre), errors.As(err, &oe):
		return badInput(fmt.Errorf("--write %w", err)) // they start with the path
	case errors.Is(err, fs.ErrExist):
		return usagef("--write %s: file exists (use --force to overwrite)", path)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return badInput(fmt.Errorf("--write: %w", err))
	case err != nil:
		return fmt.Errorf("--write: %w", err)
	}
	return nil
}
