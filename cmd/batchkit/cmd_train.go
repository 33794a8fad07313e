package main

import (
	"errors"
	"fmt"
	"github.com/batchkit/batchkit/launch/local"
	"os"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/closed"
	"github.com/batchkit/batchkit/internal/flagvalues"
	"github.com/batchkit/batchkit/trainer"
	"github.com/batchkit/batchkit/trainer/collective"
	"github.com/batchkit/batchkit/trainer/dirlock"
	"github.com/batchkit/batchkit/trainer/gemm"
	"github.com/batchkit/batchkit/trainer/health"
	"github.com/batchkit/batchkit/trainer/job"
)

// train's exits after a stop asked for by a signal (stopOnSignals). Only
// exitPreempted asks for the job to come back: SIGUSR1, the preemption
// signal a job asks for (sbatch --signal, scancel --signal=USR1), with a
// checkpoint written. EX_TEMPFAIL of sysexits.h, "try again later"; the
// batch script of batchkit sbatch --requeue requeues on it. A SIGTERM is a
// cancel or a time limit: train still checkpoints, but exits 128+SIGTERM,
// as the signal's own action would, so that no launcher's status can ask
// for a requeue then. A SIGUSR1 without --checkpoint-dir leaves nothing to
// resume: 128+SIGUSR1.
const (
	exitPreempted        = 75
	exitCancelled        = 128 + int(syscall.SIGTERM) // 143
	exitPreemptedNothing = 128 + int(syscall.SIGUSR1) // 138
)

// exitDiverged is train's exit when the loss or the weights became NaN or
// infinite (trainer.NonFiniteError): EX_DATAERR of sysexits.h. Not 1: the
// same command diverges again, so nothing should rerun it as it would a
// crash; not 2: no flag is wrong in itself.
const exitDiverged = local.ExitDiverged

// divergedExit is an error holding a NonFiniteError (alone, or with a
// plot that could not be written after it) with its exit code.
type divergedExit struct{ err error }

func (e *divergedExit) Error() string { return e.err.Error() }
func (e *divergedExit) Unwrap() error { return e.err }
func (e *divergedExit) ExitCode() int { return exitDiverged }

func trainCommand() *cli.Command {
	d := job.Defaults
	return &cli.Command{
		Name:  "train",
		Usage: "train an MLP data-parallel on every rank of the job (the embedded digits by default)",
		Description: `Run by every rank of a job (batchkit run, mpirun, srun; alone it is a world of 1), train
fits a multi-layer perceptron with SGD. Each rank trains on its share of every batch
(--batch-size per rank; torch's DistributedSampler order, a permutation of seed and epoch),
the gradients are averaged by allreduces started during the backward pass, layer by layer in
buckets of --bucket-mb MiB (0: one allreduce after it; auto, the default: 1, or 0 when a rank
has a single CPU to overlap on; mpi's and ccl's bucket calls sleep between tests of
completion, leaving the core to the backward pass: BATCHKIT_IDLE_POLL), and every rank
takes the same step: the ranks' weights stay bit-identical, which is checked every
--check-every steps.

Data: the UCI digits (1797 8×8 images, 10 classes), embedded; or --data FILE, a CSV of
numbers with the integer label 0..K-1 last and no header (.gz: gzip). Every 5th row is a
test row; features are standardised with the train rows' mean and deviation.

Checkpoints (--checkpoint-dir): rank 0 writes one every --checkpoint-every steps, at the end
and when stopped, keeping the newest 3 that verify; a run started again resumes from the newest
valid one and ends with the weights an uninterrupted run would have. A file named ckpt-N.bkpt
that cannot be used (damaged, another format version, junk, a symbolic link, not a regular
file) is named in a warning, skipped and never deleted; one of another model, data shape,
world size, batch size or seed is refused. One run at a time: rank 0 locks the directory
(DIR/.batchkit.lock: host, PID, job id, start) until train ends; a second run on it is refused
before its first step, exit 2, naming the first. A lock left by a killed run is taken over.

SIGUSR1 or SIGTERM to any rank stops every rank after the same step, and rank 0 checkpoints.
SIGUSR1 is a preemption: train exits 75 (EX_TEMPFAIL: rerun the same command to continue;
batchkit sbatch --requeue requeues the job on it), or 138 without --checkpoint-dir, which has
nothing saved. SIGTERM is a cancel or a time limit: train exits 143 on every rank, also when a
rank got SIGUSR1 too, and is not requeued. A second SIGTERM, at least 0.5 s after the first,
ends a rank at once, without a checkpoint. A run that starts says what it resumes from, or
that it found no checkpoint. Bad flags or data: 2; so are ranks given different flags or
data, which compare them before the first step and name the difference. A loss or weights
that become NaN or infinite (a learning rate too large for the batch) stop every rank at
that step: exit 65, the step in the error line and in --format json's "diverged"; nothing
of it is saved.

Output, on rank 0: a progress bar when stdout is the user's terminal (the controlling one:
not the pseudo terminal Open MPI gives a rank), one line per epoch otherwise.
--format json prints one summary object (epoch lines go to stderr): test_accuracy,
test_loss, epochs, steps, world_size, backend, samples_per_second, resumed_from_step,
weights_sha256 (SHA-256 of the final float32 parameters, little-endian), elapsed_seconds.
--report ends the output with the health report (with --format json, the summary's "health"):
each rank's compute time, its wait for the slowest rank (a barrier before each step's
allreduce) and its communication time, the same per node, each rank's link bandwidth (a
1 MiB broadcast from it), and the ranks or nodes that stand out: a median step's compute at
least 1.5× the others' median (and 0.5 s more over the run), or a link at most half of it
(from 3 ranks). A machine with more ranks than CPUs is named, and then nothing is compared.
--metrics FILE gets one JSON line per epoch: run, epoch, step, loss, train_acc, test_acc,
test_loss, samples_per_second (of the steps), elapsed (seconds since the first step,
evaluations included). run names the run by what a checkpoint must match (model, data shape,
world size, batch size, seed): a file of this run's lines (or empty) is continued from the
checkpoint's epoch (started over without one); any other existing file, another run's metrics
or a CSV, is refused (exit 2, untouched) unless --force replaces it. "-", /dev/stdout or the
file stdout goes to: the lines go to stdout, which is never truncated. A FIFO, a device or a
directory is refused.

Examples:
   batchkit train
   batchkit run -n 2 -- batchkit train --plot train.png
   batchkit run -n 4 -- batchkit train --hidden 512,512 --checkpoint-dir ckpt --format json`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "epochs", Value: d.Epochs, Usage: "passes over the train rows"},
			&cli.IntFlag{Name: "batch-size", Value: d.BatchSize, Usage: "samples per step on each rank"},
			&cli.Float64Flag{Name: "lr", Value: d.LR, Usage: "learning rate"},
			&cli.Float64Flag{Name: "momentum", Value: d.Momentum, Usage: "SGD momentum, 0 <= m < 1"},
			&cli.Float64Flag{Name: "weight-decay", Value: d.WeightDecay, Usage: "L2 weight decay"},
			&cli.Uint64Flag{Name: "seed", Value: d.Seed, Usage: "seed of the initial weights and the sample order"},
			&cli.StringFlag{Name: "hidden", Value: d.Hidden, Usage: "hidden layer sizes, comma-separated (\"\" for none)"},
			&cli.StringFlag{Name: "data", Usage: "train on the CSV `FILE` instead of the embedded digits"},
			flagvalues.With(&cli.StringFlag{Name: "backend", Value: d.Backend, Usage: "collective backend: " + closed.Join(collective.Kinds)}, flagvalues.List(collective.Kinds)),
			&cli.StringFlag{Name: "checkpoint-dir", Usage: "write checkpoints to and resume from `DIR`"},
			&cli.IntFlag{Name: "checkpoint-every", Value: d.CheckpointEvery, Usage: "steps between checkpoints (0: only at the end and when stopped)"},
			&cli.IntFlag{Name: "check-every", Value: d.CheckEvery, Usage: "steps between checks that the ranks' weights agree (0: start and end only)"},
			&cli.StringFlag{Name: "bucket-mb", Value: d.BucketMB, Usage: "average the gradient in buckets of this many MiB, each started during the backward pass (0: one allreduce after it; auto: 1, or 0 when a rank has a single CPU)"},
			&cli.StringFlag{Name: "metrics", Usage: "write one JSON line per epoch to `FILE` (- for stdout)"},
			&cli.StringFlag{Name: "plot", Usage: "draw loss and accuracy against step into `FILE` (.png, .svg or .pdf)"},
			&cli.BoolFlag{Name: "force", Usage: "let --plot and --metrics replace an existing file"},
			flagvalues.With(&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: d.Format, Usage: "text or json"}, flagvalues.List(job.Formats)),
			flagvalues.With(&cli.StringFlag{Name: "blas", Value: d.BLAS, Usage: "the GEMM library: " + strings.Join(gemm.Names(), ", ") + " (auto: the one built in, else gonum); threads: OMP_NUM_THREADS, else the rank's CPUs"}, flagvalues.List(gemm.Names())),
			&cli.BoolFlag{Name: "report", Usage: "end with the health report: compute, wait and communication time per rank and node, link bandwidths, the outliers named"},
		},
		OnUsageError: onUsageError,
		Action:       trainAction,
	}
}

func trainAction(c *cli.Context) error {
	if c.Args().Present() {
		return usagef("train takes no arguments, got %q", c.Args().First())
	}
	stop, undo := stopOnSignals(c.App.ErrWriter)
	defer undo()
	s, err := trainConfig(c).Setup()
	if err != nil {
		return trainExit(err)
	}
	topo, err := detect.Detect(os.Getenv, detect.Options{Hostname: hostname()})
	if err != nil {
		return badInput(err)
	}
	if topo.Rank == 0 && os.Getenv(envvars.Requeue) == "1" && s.Train.CheckpointDir == "" {
		fmt.Fprintf(c.App.ErrWriter, "batchkit: warning: a requeueable job (%s=1) without --checkpoint-dir: SIGUSR1 stops train with nothing saved (exit %d) and the job is not requeued\n",
			envvars.Requeue, exitPreemptedNothing)
	}
	if err := s.Check(topo, c.App.Writer, c.App.ErrWriter); err != nil {
		return trainExit(err)
	}
	s.Node = health.NodeName(topo, hostname())
	// Before Init: no rank allocates until every rank has passed this.
	if err := s.CheckMemory(topo, memAvailable()); err != nil {
		return trainExit(err)
	}
	comm, err := initComm(c, collective.Config{Topology: topo, Backend: s.Kind, Getenv: os.Getenv})
	if err != nil {
		return err
	}
	defer comm.Close()
	out := job.Output{Stdout: c.App.Writer, Stderr: c.App.ErrWriter, Terminal: isTerminal(c.App.Writer)}
	return trainExit(job.Run(trainer.FromCollective(comm), comm.Backend(), s, out, stop))
}

// trainExit is train's exit for err: a stop's own code (preemptedExit), a
// divergence's (divergedExit); bad flags, data or paths and a checkpoint
// directory refused exit 2.
func trainExit(err error) error {
	var (
		pe *trainer.PreemptedError
		ie *trainer.IncompatibleError
		le *dirlock.LockedError
		ue *dirlock.UnusableError
		nf *trainer.NonFiniteError
		de *trainer.DisagreeError
	)
	switch {
	case errors.As(err, &pe):
		return &preemptedExit{pe}
	case errors.As(err, &nf):
		return &divergedExit{err}
	case errors.Is(err, job.ErrInvalid), errors.As(err, &ie), errors.As(err, &le), errors.As(err, &ue), errors.As(err, &de):
		return badInput(err)
	}
	return err
}

// preemptedExit is a PreemptedError with its exit code: exitPreempted only
// for a preemption that wrote a checkpoint.
type preemptedExit struct{ err *trainer.PreemptedError }

func (e *preemptedExit) Error() string {
	pe, code := e.err, e.ExitCode()
	saved := "checkpoint " + pe.Checkpoint
	if pe.Checkpoint == "" {
		saved = "nothing saved (no --checkpoint-dir)"
	}
	switch {
	case pe.Reason == trainer.Cancel:
		return fmt.Sprintf("cancelled after step %d (SIGTERM: scancel or the time limit): %s; exit %d, not a requeue", pe.Step, saved, code)
	case pe.Checkpoint == "":
		return fmt.Sprintf("preempted after step %d (SIGUSR1): %s; exit %d, not %d: a requeue would start from step 0", pe.Step, saved, code, exitPreempted)
	}
	return fmt.Sprintf("preempted after step %d (SIGUSR1): %s", pe.Step, saved)
}
func (e *preemptedExit) Unwrap() error { return e.err }
func (e *preemptedExit) ExitCode() int {
	switch {
	case e.err.Reason == trainer.Cancel:
		return exitCancelled
	case e.err.Checkpoint == "":
		return exitPreemptedNothing
	}
	return exitPreempted
}
