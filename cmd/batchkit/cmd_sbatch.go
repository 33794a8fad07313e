package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/internal/outfile"
	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/launch/sbatch"
	"github.com/batchkit/batchkit/slurm"
	"github.com/batchkit/batchkit/templates"
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

// sbatchRequest is the profile under the flags, the batchkit binary the
// ranks run and the templates that render the script.
func sbatchRequest(c *cli.Context, program []string) (sbatch.Request, error) {
	r, err := loadProfile(c, sbatchOverrides)
	if err != nil {
		return sbatch.Request{}, err
	}
	failFast, err := failFastFrom(c, nil)
	if err != nil {
		return sbatch.Request{}, err
	}
	if n := c.Int("torchrun"); c.IsSet("torchrun") && n < 1 { // 0 would silently mean no torchrun
		return sbatch.Request{}, usagef("--torchrun %d: want the number of workers on each node, at least 1", n)
	}
	self := c.String("batchkit")
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return sbatch.Request{}, fmt.Errorf("finding batchkit's own path (give --batchkit): %w", err)
		}
	}
	set, err := templates.Load(r.Profile.Templates)
	if err != nil {
		if o, ok := r.Origin("templates"); ok {
			err = fmt.Errorf("%s: templates: %w", o, err)
		}
		return sbatch.Request{}, badInput(err)
	}
	job := slurm.JobOptions{
		JobName: c.String("job-name"), Nodes: c.String("nodes"), NTasks: c.Int("ntasks"),
		NTasksPerNode: c.Int("ntasks-per-node"), CPUsPerTask: c.Int("cpus-per-task"), GPUs: c.String("gpus"),
		Output: c.String("output"), Error: c.String("error"), Array: c.String("array"),
		Exclusive: c.Bool("exclusive"), Signal: c.String("signal"), Dependency: c.String("dependency"),
		Mem: c.String("mem"), MemPerCPU: c.String("mem-per-cpu"), Gres: c.String("gres"),
		GPUsPerNode: c.String("gpus-per-node"), GPUsPerTask: c.String("gpus-per-task"),
		Nodelist: c.String("nodelist"), Exclude: c.String("exclude"), Reservation: c.String("reservation"),
		Chdir: c.String("chdir"), MailType: c.String("mail-type"), MailUser: c.String("mail-user"),
		Requeue: r.Profile.Slurm.Requeue, Extra: []string(*c.Generic("sbatch-arg").(*stringList)),
	}
	p, err := batchProfile(r, os.Environ())
	if err != nil {
		return sbatch.Request{}, err
	}
	return sbatch.Request{ProfileName: r.Name, Profile: p, Job: job, Program: program, Batchkit: self,
		Templates: set, Wait: c.Bool("wait"), SubmitTimeout: c.Duration("submit-timeout"), Torchrun: c.Int("torchrun"), FailFast: failFast}, nil
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

// sbatchSpellings rewrites the attached short forms sbatch takes (-N2,
// -t30, -Jtrain) among batchkit sbatch's flags into -N=2 ..., which the
// flag parser reads; it would take -N2 for a flag named "N2". Only the
// words before the program are flags, and a flag's value given as the next
// word is skipped. Other commands' arguments are returned as they are.
func sbatchSpellings(app *cli.App, args []string) []string {
	cmd := findCommand(app.Commands, "sbatch")
	if len(args) < 2 || cmd == nil || args[1] != cmd.Name {
		return args
	}
	out := slices.Clone(args)
	for i := 2; i < len(out); i++ {
		w := out[i]
		if w == "--" || w == "-" || !strings.HasPrefix(w, "-") {
			break
		}
		if takesValue(cmd.Flags, w) {
			i++ // its value, whatever it looks like
			continue
		}
		out[i] = attachedShort(cmd.Flags, w)
	}
	return out
}

// attachedShort is -X=rest for a word -Xrest whose X is a one-letter flag
// taking a value, unless Xrest names a flag itself (-ntasks-per-node).
func attachedShort(flags []cli.Flag, w string) string {
	if strings.HasPrefix(w, "--") || len(w) < 3 {
		return w
	}
	name, _, _ := strings.Cut(w[1:], "=")
	if isFlag(flags, name) || !takesValue(flags, w[:2]) {
		return w
	}
	return w[:2] + "=" + w[2:]
}

func isFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}

// sbatchUsageError turns "flag provided but not defined" for an sbatch
// option batchkit sbatch has no flag for into what to write instead.
func sbatchUsageError(c *cli.Context, err error, sub bool) error {
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		if hint := sbatchOptionHint(c.Command.Flags, writtenAs(c, name)); hint != "" {
			return usagef("%s", hint)
		}
	}
	return onUsageError(c, err, sub)
}

// writtenAs is the word of the command line that the flag parser reported
// as name (it drops the dashes and any "=VALUE"); "--name" if none is.
func writtenAs(c *cli.Context, name string) string {
	if lineage := c.Lineage(); len(lineage) > 1 {
		for _, w := range lineage[1].Args().Slice() {
			if n, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "="); n == name && strings.HasPrefix(w, "-") {
				return w
			}
		}
	}
	return "--" + name
}

// sbatchOptionHint says how to pass the sbatch option in word w, which
// batchkit sbatch has no flag for: by the flag it has, spelled in full, or
// with --sbatch-arg. "" when w is not sbatch's (or abbreviates several).
// A single-dash word is a long name when sbatch has one (as batchkit's
// flags may be written), else a short option with its value attached, as
// sbatch reads it.
func sbatchOptionHint(flags []cli.Flag, w string) string {
	name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
	written := w
	if hasValue {
		written = strings.TrimSuffix(w, "="+value)
	}
	o, ok := slurm.LookupLong(name)
	if !ok && !strings.HasPrefix(w, "--") && name != "" {
		if o, ok = slurm.LookupShort(name[0]); ok && len(name) > 1 {
			value, hasValue = name[1:], true
		}
	}
	switch {
	case !ok:
		return ""
	case isFlag(flags, o.Long):
		return fmt.Sprintf("%s: batchkit sbatch spells this option --%s", written, o.Long)
	}
	use := "--sbatch-arg=--" + o.Long
	switch {
	case hasValue && o.Arg != slurm.NoValue:
		use += "=" + value
	case o.Arg == slurm.ValueRequired:
		use += "=VALUE"
	case o.Arg == slurm.ValueOptional:
		use += "[=VALUE]"
	}
	return fmt.Sprintf("%s: batchkit sbatch has no flag for this sbatch option: use %s", written, use)
}
