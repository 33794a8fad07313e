package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/closed"
	"github.com/batchkit/batchkit/internal/outfile"
	"github.com/batchkit/batchkit/trainer"
	"github.com/batchkit/batchkit/trainer/collective"
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

func trainCommand() *cli.Command {
	return &cli.Command{
		Name:  "train",
		Usage: "train an MLP data-parallel on every rank of the job (the embedded digits by default)",
		Description: `Run by every rank of a job (batchkit run, mpirun, srun; alone it is a world of 1), train
fits a multi-layer perceptron with SGD. Each rank trains on its share of every batch
(--batch-size per rank; torch's DistributedSampler order, a permutation of seed and epoch),
the gradients are averaged with one allreduce per step, and every rank takes the same step:
the ranks' weights stay bit-identical, which is checked every --check-every steps.

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
that it found no checkpoint. Bad flags or data: 2.

Output, on rank 0: a progress bar when stdout is a terminal, one line per epoch otherwise.
--format json prints one summary object (epoch lines go to stderr): test_accuracy,
test_loss, epochs, steps, world_size, backend, samples_per_second, resumed_from_step,
weights_sha256 (SHA-256 of the final float32 parameters, little-endian), elapsed_seconds.
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
			&cli.IntFlag{Name: "epochs", Value: 20, Usage: "passes over the train rows"},
			&cli.IntFlag{Name: "batch-size", Value: 32, Usage: "samples per step on each rank"},
			&cli.Float64Flag{Name: "lr", Value: 0.05, Usage: "learning rate"},
			&cli.Float64Flag{Name: "momentum", Value: 0.9, Usage: "SGD momentum, 0 <= m < 1"},
			&cli.Float64Flag{Name: "weight-decay", Value: 1e-4, Usage: "L2 weight decay"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the initial weights and the sample order"},
			&cli.StringFlag{Name: "hidden", Value: "64", Usage: "hidden layer sizes, comma-separated (\"\" for none)"},
			&cli.StringFlag{Name: "data", Usage: "train on the CSV `FILE` instead of the embedded digits"},
			&cli.StringFlag{Name: "backend", Value: string(collective.Auto), Usage: "collective backend: " + closed.Join(collective.Kinds)},
			&cli.StringFlag{Name: "checkpoint-dir", Usage: "write checkpoints to and resume from `DIR`"},
			&cli.IntFlag{Name: "checkpoint-every", Value: 100, Usage: "steps between checkpoints (0: only at the end and when stopped)"},
			&cli.IntFlag{Name: "check-every", Value: 100, Usage: "steps between checks that the ranks' weights agree (0: start and end only)"},
			&cli.StringFlag{Name: "metrics", Usage: "write one JSON line per epoch to `FILE` (- for stdout)"},
			&cli.StringFlag{Name: "plot", Usage: "draw loss and accuracy against step into `FILE` (.png, .svg or .pdf)"},
			&cli.BoolFlag{Name: "force", Usage: "let --plot and --metrics replace an existing file"},
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "text", Usage: "text or json"},
		},
		OnUsageError: onUsageError,
		Action:       trainAction,
	}
}

// trainSetup is everything the flags decide, checked before any rank
// connects.
type trainSetup struct {
	cfg         trainer.Config
	kind        collective.Kind
	json        bool
	dataName    string
	train, test *trainer.Dataset
	sizes       []int        // the model's layer sizes
	metrics     *metricsDest // rank 0's --metrics, nil without
}

func trainAction(c *cli.Context) error {
	if c.Args().Present() {
		return usagef("train takes no arguments, got %q", c.Args().First())
	}
	stop, undo := stopOnSignals(c.App.ErrWriter)
	defer undo()
	s, err := trainFlags(c)
	if err != nil {
		return err
	}
	topo, err := detect.Detect(os.Getenv, detect.Options{Hostname: hostname()})
	if err != nil {
		return badInput(err)
	}
	if err := checkTrainPaths(c, topo.Rank); err != nil {
		return err
	}
	s.cfg.JobID = topo.JobID // named by the checkpoint directory's lock
	if topo.Rank == 0 && os.Getenv(envvars.Requeue) == "1" && s.cfg.CheckpointDir == "" {
		fmt.Fprintf(c.App.ErrWriter, "batchkit: warning: a requeueable job (%s=1) without --checkpoint-dir: SIGUSR1 stops train with nothing saved (exit %d) and the job is not requeued\n",
			envvars.Requeue, exitPreemptedNothing)
	}
	if plot := c.String("plot"); topo.Rank == 0 && plot != "" {
		if err := checkPlotPath(plot, nil, c.Bool("force")); err != nil {
			return err
		}
	} else if c.IsSet("force") && plot == "" && c.String("metrics") == "" {
		return usagef("--force is for --plot and --metrics: it lets them replace an existing file")
	}
	if m := c.String("metrics"); topo.Rank == 0 && m != "" {
		run := metricsRunID(s.sizes, s.train, topo.WorldSize, s.cfg.BatchSize, s.cfg.Seed)
		if s.metrics, err = checkMetrics(m, run, c.String("data"), c.Bool("force"), c.App.Writer, c.App.ErrWriter); err != nil {
			return err
		}
	}
	comm, err := initComm(c, collective.Config{Topology: topo, Backend: s.kind, Getenv: os.Getenv})
	if err != nil {
		return err
	}
	defer comm.Close()
	return runTraining(c, s, comm, stop)
}

// trainFlags validates the flags and reads the data: one line, exit 2.
func trainFlags(c *cli.Context) (*trainSetup, error) {
	s := &trainSetup{dataName: "digits"}
	switch c.String("format") {
	case "text":
	case "json":
		s.json = true
	default:
		return nil, usagef("invalid --format %q: want text or json", c.String("format"))
	}
	var err error
	if s.kind, err = collective.ParseKind(c.String("backend")); err != nil {
		return nil, usagef("invalid --backend %q: want one of %s", c.String("backend"), closed.Join(collective.Kinds))
	}
	hidden, err := parseHidden(c.String("hidden"))
	if err != nil {
		return nil, usagef("invalid --hidden %q: %v", c.String("hidden"), err)
	}
	var hyper [3]float32 // as given, or refused: float32 would change them
	for i, name := range []string{"lr", "momentum", "weight-decay"} {
		if hyper[i], err = trainer.Float32(c.Float64(name)); err != nil {
			return nil, usagef("invalid --%s %v: %v", name, c.Float64(name), err)
		}
	}
	s.cfg = trainer.Config{Hidden: hidden, Epochs: c.Int("epochs"), BatchSize: c.Int("batch-size"),
		LR: hyper[0], Momentum: hyper[1], WeightDecay: hyper[2],
		Seed: c.Uint64("seed"), CheckEvery: c.Int("check-every"),
		CheckpointDir: c.String("checkpoint-dir"), CheckpointEvery: c.Int("checkpoint-every")}
	if err := s.cfg.Validate(); err != nil {
		return nil, usagef("invalid flags: %v", err)
	}
	var d *trainer.Dataset
	if path := c.String("data"); path != "" {
		s.dataName = path
		d, err = trainer.ReadDataFile(path)
	} else {
		d, err = trainer.Digits()
	}
	if err != nil {
		return nil, badInput(err)
	}
	if s.train, s.test, err = trainer.Split(d); err != nil {
		return nil, usagef("invalid --data %s: %v", s.dataName, err)
	}
	m, err := trainer.NewMLP(d.Features, hidden, d.Classes)
	if err != nil {
		return nil, usagef("invalid --hidden %q: %v", c.String("hidden"), err)
	}
	s.sizes = m.Sizes
	return s, nil
}

// checkTrainPaths refuses, before any rank connects, the paths train would
// fail on after the training: a checkpoint directory that is a file. Rank
// 0's --metrics is checkMetrics'.
func checkTrainPaths(c *cli.Context, rank int) error {
	if dir := c.String("checkpoint-dir"); dir != "" {
		if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
			return usagef("invalid --checkpoint-dir %q: is %s, not a directory", dir, cmp.Or(outfile.KindOf(fi.Mode()), "a file"))
		}
	}
	return nil
}

// parseHidden reads "64" or "512,512"; "" is no hidden layer.
func parseHidden(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive layer size", f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// stopOnSignals turns SIGUSR1 and SIGTERM into the loop's stop request, at
// the edge: the library installs no handler. SIGUSR1 asks for a
// trainer.Preempt, SIGTERM for a trainer.Cancel, which stays once asked:
// a cancelled job's ranks can get both (Slurm's SIGTERM, then the batch
// script's SIGUSR1). It is called before the rendezvous, so that a signal
// Slurm sends while the ranks start up is kept for the first step (it
// would otherwise kill the rank, and the job would end without a
// checkpoint). A second SIGTERM ends the rank at once, by that signal: the
// way out of a rank that hangs (a rendezvous that never completes) — one
// at least secondTermAfter after the first: Slurm, the launcher and batchkit
// exec can each pass the same cancel on (four SIGTERMs within 0.1 s were
// seen under MPICH's Hydra), and those copies must not cost the checkpoint.
// SIGUSR1 never ends it: with scancel --full a rank gets it from Slurm and
// again from the batch shell. The returned func undoes it.
func stopOnSignals(errw io.Writer) (stop func() trainer.StopReason, undo func()) {
	var requested atomic.Uint32
	sigs := make(chan os.Signal, 4)
	done := make(chan struct{})
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGUSR1)
	go func() {
		var firstTerm time.Time
		for {
			select {
			case s := <-sigs:
				if s != syscall.SIGTERM {
					requested.CompareAndSwap(uint32(trainer.NoStop), uint32(trainer.Preempt))
					continue
				}
				requested.Store(uint32(trainer.Cancel))
				if firstTerm.IsZero() {
					firstTerm = time.Now()
				} else if time.Since(firstTerm) >= secondTermAfter {
					fmt.Fprintln(errw, "batchkit: second SIGTERM: stopping now, without a checkpoint")
					signal.Reset(syscall.SIGTERM)
					syscall.Kill(os.Getpid(), syscall.SIGTERM)
				}
			case <-done:
				return
			}
		}
	}()
	return func() trainer.StopReason { return trainer.StopReason(requested.Load()) },
		func() { signal.Stop(sigs); close(done) }
}

// secondTermAfter is how long after the first SIGTERM a second one ends a
// rank at once; one sooner is a copy of the first.
const secondTermAfter = 500 * time.Millisecond

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

// runTraining trains on this rank; rank 0 reports.
func runTraining(c *cli.Context, s *trainSetup, comm *collective.Comm, stop func() trainer.StopReason) error {
	cfg := s.cfg
	cfg.Stop = stop
	rep := &trainReport{setup: s, out: c.App.Writer, log: c.App.Writer, backend: comm.Backend(), world: comm.Size(),
		bar: isTerminal(c.App.Writer) && !s.json}
	if s.json {
		rep.log = c.App.ErrWriter
	}
	if comm.Rank() == 0 {
		cfg.OnStart, cfg.OnStep, cfg.OnEpoch = rep.start, rep.step, rep.epoch
		cfg.Warn = func(err error) { fmt.Fprintf(c.App.ErrWriter, "batchkit: warning: %v\n", err) }
	}
	begin := time.Now()
	res, err := trainer.Train(trainer.FromCollective(comm), s.train, s.test, cfg)
	if cerr := rep.close(); err == nil {
		err = cerr
	}
	var (
		pe *trainer.PreemptedError
		ie *trainer.IncompatibleError
		le *trainer.LockedError
		ue *trainer.LockError
	)
	switch {
	case errors.As(err, &pe):
		return &preemptedExit{pe}
	case errors.As(err, &ie), errors.As(err, &le), errors.As(err, &ue):
		return badInput(err)
	case err != nil:
		return err
	}
	if comm.Rank() != 0 {
		return nil
	}
	if path := c.String("plot"); path != "" {
		if err := trainer.PlotFile(path, rep.hist, c.Bool("force")); err != nil {
			return fmt.Errorf("--plot %s: %w", path, err)
		}
	}
	return rep.summary(res, time.Since(begin), c.String("plot"))
}

// trainReport is rank 0's output: progress, epoch lines, metrics, summary.
type trainReport struct {
	setup       *trainSetup
	out, log    io.Writer // the summary; epoch lines (stderr with --format json)
	backend     string
	world       int
	bar         bool
	progress    *progressbar.ProgressBar
	metrics     io.Writer    // --metrics, nil without
	closeMetric func() error // nil for a stream
	hist        trainer.History
	resumedFrom int
	epochs      int
}

func (r *trainReport) start(st trainer.Start) error {
	r.resumedFrom, r.epochs = st.ResumedFrom, r.setup.cfg.Epochs
	m := st.Model
	fmt.Fprintf(r.log, "train: MLP %s (%d parameters) on %s: %d train / %d test rows; %d rank(s) over %s, batch %d per rank, %d steps per epoch\n",
		joinInts(m.Sizes, "-"), m.NumParams(), r.setup.dataName, r.setup.train.Rows(), r.setup.test.Rows(),
		r.world, r.backend, r.setup.cfg.BatchSize, st.StepsPerEpoch)
	if st.ResumedFrom > 0 {
		fmt.Fprintf(r.log, "train: %s\n", trainer.ResumeLine(st, r.epochs))
	} else if dir := r.setup.cfg.CheckpointDir; dir != "" {
		fmt.Fprintf(r.log, "train: no checkpoint in %s: starting from step 0\n", dir)
	}
	if d := r.setup.metrics; d != nil {
		// A fresh run starts the file over; a resumed one continues it
		// from its checkpoint, which may be older than the last epochs
		// the killed run wrote: the lines of the epochs it will run again
		// are dropped, or they would be there twice.
		w, closeFn, err := d.open(st.ResumedAtEpoch)
		if err != nil {
			return fmt.Errorf("--metrics: %w", err)
		}
		r.metrics, r.closeMetric = w, closeFn
	}
	if r.bar && st.TotalSteps > st.ResumedFrom {
		r.progress = progressbar.NewOptions(st.TotalSteps-st.ResumedFrom,
			progressbar.OptionSetWriter(r.out), progressbar.OptionSetWidth(30), progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true), progressbar.OptionClearOnFinish())
	}
	return nil
}

func (r *trainReport) step(s trainer.StepInfo) error {
	r.hist.Steps = append(r.hist.Steps, s)
	if r.progress != nil {
		r.progress.Describe(fmt.Sprintf("epoch %d/%d loss %.4f", s.Epoch+1, r.epochs, s.Loss))
		r.progress.Add(1)
	}
	return nil
}

// epochLine is one --metrics line. Run comes first: a file is recognised
// as the run's by how its lines begin (metricsPrefix).
type epochLine struct {
	Run              string  `json:"run"`
	Epoch            int     `json:"epoch"`
	Step             int     `json:"step"`
	Loss             float64 `json:"loss"`
	TrainAcc         float64 `json:"train_acc"`
	TestAcc          float64 `json:"test_acc"`
	TestLoss         float64 `json:"test_loss"`
	SamplesPerSecond float64 `json:"samples_per_second"`
	Elapsed          float64 `json:"elapsed"`
}

func (r *trainReport) epoch(e trainer.EpochInfo) error {
	r.hist.Epochs = append(r.hist.Epochs, e)
	if r.progress != nil {
		r.progress.Clear()
	}
	fmt.Fprintf(r.log, "epoch %3d/%d  step %6d  loss %.4f  train_acc %.4f  test_acc %.4f  %.0f samples/s\n",
		e.Epoch, r.epochs, e.GlobalStep, e.Loss, e.TrainAcc, e.TestAcc, e.SamplesPerSecond)
	if r.metrics == nil {
		return nil
	}
	b, err := json.Marshal(epochLine{Run: r.setup.metrics.run, Epoch: e.Epoch, Step: e.GlobalStep, Loss: e.Loss, TrainAcc: e.TrainAcc,
		TestAcc: e.TestAcc, TestLoss: e.TestLoss, SamplesPerSecond: e.SamplesPerSecond, Elapsed: e.Elapsed.Seconds()})
	if err == nil {
		_, err = r.metrics.Write(append(b, '\n'))
	}
	if err != nil {
		return fmt.Errorf("--metrics %s: %w", r.setup.metrics.path, err)
	}
	return nil
}

func (r *trainReport) close() error {
	if r.progress != nil {
		r.progress.Finish()
	}
	if r.closeMetric != nil {
		if err := r.closeMetric(); err != nil {
			return fmt.Errorf("--metrics %s: %w", r.setup.metrics.path, err)
		}
	}
	return nil
}

// trainSummary is --format json's output.
type trainSummary struct {
	TestAccuracy     float64 `json:"test_accuracy"`
	TestLoss         float64 `json:"test_loss"`
	Epochs           int     `json:"epochs"`
	Steps            int     `json:"steps"`
	WorldSize        int     `json:"world_size"`
	Backend          string  `json:"backend"`
	SamplesPerSecond float64 `json:"samples_per_second"`
	ResumedFromStep  int     `json:"resumed_from_step"`
	WeightsSHA256    string  `json:"weights_sha256"`
	ElapsedSeconds   float64 `json:"elapsed_seconds"`
	Model            []int   `json:"model"`
	Parameters       int     `json:"parameters"`
	Plot             string  `json:"plot,omitempty"`
}

func (r *trainReport) summary(res trainer.Result, elapsed time.Duration, plot string) error {
	s := trainSummary{TestAccuracy: res.TestAcc, TestLoss: res.TestLoss, Epochs: res.Epochs, Steps: res.Steps,
		WorldSize: r.world, Backend: r.backend, SamplesPerSecond: res.SamplesPerSecond, ResumedFromStep: res.ResumedFrom,
		WeightsSHA256: trainer.WeightsSHA256(res.Params), ElapsedSeconds: elapsed.Seconds(),
		Model: res.Model.Sizes, Parameters: res.Model.NumParams(), Plot: plot}
	if r.setup.json {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(r.out, "%s\n", b)
		return err
	}
	fmt.Fprintf(r.out, "test accuracy %.4f (loss %.4f) after %d epochs, %d steps on %d rank(s), %.1f s, %.0f samples/s\nweights sha256 %s\n",
		s.TestAccuracy, s.TestLoss, s.Epochs, s.Steps, s.WorldSize, s.ElapsedSeconds, s.SamplesPerSecond, s.WeightsSHA256)
	if plot != "" {
		fmt.Fprintf(r.out, "plot: %s\n", plot)
	}
	return nil
}

func joinInts(xs []int, sep string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, sep)
}
