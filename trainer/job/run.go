package job

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/batchkit/batchkit/trainer"
	"github.com/batchkit/batchkit/trainer/health"
)

// Output is where rank 0 reports: the summary and epoch lines on Stdout
// (epoch lines on Stderr with --format json), warnings on Stderr; a
// progress bar when Terminal (Stdout is one) and the format is text.
type Output struct {
	Stdout, Stderr io.Writer
	Terminal       bool
}

// Run trains on this rank of comm (its backend named backend), stopping
// when stop asks; rank 0 reports to out (the summary before the final
// checkpoint and the plot, which can still fail), writes the metrics and
// the plot.
// The trainer's errors (*trainer.PreemptedError after a stop, a checkpoint
// directory refused ...) come back as they are.
func Run(comm trainer.Comm, backend string, s *Setup, out Output, stop func() trainer.StopReason) error {
	cfg := s.Train
	cfg.Stop = stop
	fewest, err := fewestCPUs(comm, s.share.n)
	if err != nil {
		return err
	}
	var buckets string
	cfg.BucketBytes, buckets = s.Buckets(backend, fewest)
	rep := &report{setup: s, out: out.Stdout, log: out.Stdout, backend: backend, world: comm.Size(),
		buckets: buckets, bar: out.Terminal && !s.JSON}
	if s.JSON {
		rep.log = out.Stderr
	}
	begin := time.Now()
	if comm.Rank() == 0 {
		cfg.OnStart, cfg.OnStep, cfg.OnEpoch = rep.start, rep.step, rep.epoch
		// The summary comes before what can still fail: the final
		// checkpoint (Train writes it after OnEnd) and the plot.
		cfg.OnEnd = func(res trainer.Result) error { return rep.summary(res, time.Since(begin), s.Config.Plot) }
		cfg.Warn = func(err error) { fmt.Fprintf(out.Stderr, "batchkit: warning: %v\n", err) }
	}
	var c trainer.Comm = comm
	if s.Config.Report {
		c = withHealth(comm, s.Node, &cfg, rep)
	}
	_, err = trainer.Train(c, s.TrainSet, s.TestSet, cfg)
	if cerr := rep.close(); err == nil {
		err = cerr
	}
	// A run that diverged has its summary out (OnEnd) and a plot of the
	// steps before it, if any.
	var nf *trainer.NonFiniteError
	if err != nil && !(errors.As(err, &nf) && len(rep.hist.Steps) > 0) || comm.Rank() != 0 {
		return err
	}
	if path := s.Config.Plot; path != "" {
		if perr := PlotFile(path, rep.hist, s.Config.Force); perr != nil {
			return errors.Join(err, fmt.Errorf("--plot %s: %w", path, perr))
		}
	}
	return err
}

// withHealth times every step of cfg's run on a health.Probe of comm (the
// Comm to train on, returned) and, at the end on every rank, collects the
// health report into rep before rank 0's summary, which prints it.
func withHealth(comm trainer.Comm, node string, cfg *trainer.Config, rep *report) trainer.Comm {
	p := health.NewProbe(comm, nil)
	onStep, onEnd := cfg.OnStep, cfg.OnEnd
	cfg.OnStepBegin = p.StepBegin
	cfg.OnStep = func(si trainer.StepInfo) error {
		p.StepEnd(si.Exposed)
		if onStep != nil {
			return onStep(si)
		}
		return nil
	}
	cfg.OnEnd = func(res trainer.Result) error {
		s := p.Sample()
		s.Node = node
		h, err := health.Collect(comm, s)
		if err != nil {
			return err
		}
		rep.health = &h
		if onEnd != nil {
			return onEnd(res)
		}
		return nil
	}
	return p
}
