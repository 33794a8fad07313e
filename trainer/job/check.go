package job

import (
	"cmp"
	"io"
	"os"
	"path/filepath"

	"github.com/batchkit/batchkit/internal/outfile"
	"github.com/batchkit/batchkit/internal/plotfile"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer"
)

// Check refuses, before any rank connects, the paths the run would fail
// on after the training: a checkpoint directory that is a file, and on
// rank 0 a --plot or --metrics that could not be written, whose file
// system has no room for it, or that would replace a file without --force
// (the checkpoint directory's room is the trainer's to check, once
// locked). It decides rank 0's --metrics (stdout and stderr are this
// process's, which --metrics may name) and names the job in the
// checkpoint directory's lock. Unpinned ranks share the node's CPUs among
// their BLAS threads (shareNode).
func (s *Setup) Check(topo topology.Topology, stdout, stderr io.Writer) error {
	c := s.Config
	s.share = s.readShare(topo)
	if err := s.shareNode(topo); err != nil {
		return err
	}
	if dir := c.CheckpointDir; dir != "" {
		if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
			return invalid("invalid --checkpoint-dir %q: is %s, not a directory", dir, cmp.Or(outfile.KindOf(fi.Mode()), "a file"))
		}
	}
	s.Train.JobID = topo.JobID
	if topo.Rank == 0 && c.Plot != "" {
		if err := plotfile.Check(c.Plot, nil, c.Force); err != nil {
			return invalid("invalid --plot %v", err)
		}
		steps := trainer.StepsPerEpoch(s.TrainSet.Rows(), topo.WorldSize, s.Train.BatchSize)
		if err := outfile.CheckSpace(filepath.Dir(c.Plot), PlotBytes(s.Train.Epochs, steps)); err != nil {
			return invalid("invalid --plot %q: %v", c.Plot, err)
		}
	} else if c.Force && c.Plot == "" && c.Metrics == "" {
		return invalid("--force is for --plot and --metrics: it lets them replace an existing file")
	}
	if topo.Rank == 0 && c.Metrics != "" {
		if metricsStream(c.Metrics, stdout, stderr) == nil {
			if err := outfile.CheckSpace(filepath.Dir(c.Metrics), MetricsBytes(s.Train.Epochs)); err != nil {
				return invalid("invalid --metrics %q: %v", c.Metrics, err)
			}
		}
		run := RunID(s.Sizes, s.TrainSet, topo.WorldSize, s.Train.BatchSize, s.Train.Seed)
		var err error
		if s.metricsFile, err = checkMetrics(c.Metrics, run, c.Data, c.Force, stdout, stderr); err != nil {
			return err
		}
	}
	return nil
}

// CheckMemory refuses a run whose model, steps and data would not fit in
// what the node has for its ranks (avail, nodemem.Available; 0 when
// unknown): trainer.CheckMemory, an ErrInvalid. Call it before the
// collectives' Init, so that no rank allocates until every rank has passed
// it.
func (s *Setup) CheckMemory(topo topology.Topology, avail int64) error {
	if err := trainer.CheckMemory(s.TrainSet, s.TestSet, s.Train, topo.WorldSize, topo.LocalWorldSize, avail); err != nil {
		return &invalidError{err}
	}
	return nil
}
