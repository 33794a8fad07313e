package job

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/batchkit/batchkit/trainer"
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
	rep := &report{setup: s, out: out.Stdout, log: out.Stdout, backend: backend, world: comm.Size(),
		bar: out.Terminal && !s.JSON}
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
	_, err := trainer.Train(comm, s.TrainSet, s.TestSet, cfg)
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
