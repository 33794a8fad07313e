package trainer

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// Train runs the data-parallel loop on this rank: every rank calls it with
// its Comm, the same data and the same Config, which the ranks compare first
// (a *DisagreeError on every rank names what differs). Each step trains on the
// rank's shard of the batch (Shard), sums the gradient with AllreduceSum
// (in buckets started during the backward pass, BucketBytes, or one call
// after it) and takes the same SGD step on its mean (SGD.StepMean), so every
// rank keeps bit-identical weights (checked every CheckEvery steps).
//
// With a CheckpointDir rank 0 first locks the directory for the run
// (trainer/dirlock; a directory in use is a *dirlock.LockedError on rank 0, on
// every rank before the first step) until Train returns; every rank resumes
// from the newest valid checkpoint there; rank 0 writes one every
// CheckpointEvery steps, at the end and when stopped. When any rank's Stop
// reports a reason, all ranks finish the same step and Train returns a
// *PreemptedError, with the same Reason on every rank.
func Train(c Comm, train, test *Dataset, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if test.Features != train.Features {
		return Result{}, fmt.Errorf("test set has %d features, train set %d", test.Features, train.Features)
	}
	if err := agree(c, cfg, train, test); err != nil {
		return Result{}, err
	}
	m, err := NewMLP(train.Features, cfg.Hidden, max(train.Classes, test.Classes))
	if err != nil {
		return Result{}, err
	}
	m.Gemm = cfg.Gemm
	r := newRun(c, m, train, test, cfg)
	defer r.ov.stop()
	if r.dir, err = openCheckpointDir(c, r.cfg, checkpointBytes(r.header(), m.NumParams())); err != nil {
		return Result{}, err
	}
	defer r.dir.close()
	if err := r.resume(); err != nil {
		return Result{}, err
	}
	if err := r.check(); err != nil {
		return Result{}, err
	}
	if cfg.OnStart != nil {
		if err := cfg.OnStart(r.start()); err != nil {
			return Result{}, err
		}
	}
	// The clock starts just before the first step: Elapsed and samples/s
	// leave out start-up (data, init, resume, the first weight check, which
	// waits for the slowest rank), as a benchmark of the loop wants them.
	r.began = r.now()
	for r.epoch < cfg.Epochs {
		if err := r.runEpoch(); err != nil {
			var nf *NonFiniteError
			if errors.As(err, &nf) {
				return r.diverged(nf)
			}
			return Result{}, err
		}
	}
	return r.finish()
}

// run is one rank's training state.
type run struct {
	c           Comm
	m           MLP
	train, test *Dataset
	cfg         Config
	now         func() time.Time
	dir         *checkpointDir // nil without a CheckpointDir; locked on rank 0

	// saveErr is rank 0's failed checkpoint, which every rank learns of
	// with the next collective (step, preempted, finish) and stops on,
	// rather than rank 0 leaving the others to find a lost connection.
	saveErr error

	params []float32
	opt    *SGD
	batch  int       // rows of a step: BatchSize, or the whole shard when that is smaller
	buf    []float32 // the piggybacked extras, then the gradient
	ov     *overlap  // allreduces buf, in buckets (buckets.go)
	ws     Workspace
	bx     []float32
	by     []int32
	hash   []byte

	epoch, stepInEpoch, globalStep int
	lossSum, correct, samples      float64 // this epoch's, all ranks
	resumedFrom                    int
	resumedFile                    string
	began                          time.Time
	ranSamples                     float64 // this run's, all ranks
	epochBegan                     time.Time
	epochSamples                   float64   // this run's part of the epoch
	epochComm                      CommStats // r.ov.stats when the epoch's steps began
}

// The elements put before the gradient in a step's buffer, summed with it
// (with layer 0's gradient, the bucket sent last): the sum makes "any rank
// was asked to stop" > 0 and "any rank was asked to cancel" > 0, and the
// metrics all ranks' (loss and correct over the count of samples).
const (
	xStop = iota
	xCancel
	xSaveFailed // rank 0's last checkpoint failed (saveErr)
	xLoss
	xCorrect
	xCount
	nExtra
)

func newRun(c Comm, m MLP, train, test *Dataset, cfg Config) *run {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Warn == nil {
		cfg.Warn = func(error) {}
	}
	n, b := m.NumParams(), stepRows(train.Rows(), c.Size(), cfg.BatchSize)
	r := &run{c: c, m: m, train: train, test: test, cfg: cfg, now: cfg.Now,
		params: make([]float32, n), opt: NewSGD(n, cfg.LR, cfg.Momentum, cfg.WeightDecay),
		buf: make([]float32, nExtra+n), batch: b,
		bx: make([]float32, b*train.Features), by: make([]int32, b)}
	r.ov = newOverlap(c, r.buf, bucketPlan(m, nExtra, cfg.BucketBytes))
	m.InitParams(r.params, cfg.Seed)
	return r
}

func (r *run) stepsPerEpoch() int {
	return StepsPerEpoch(r.train.Rows(), r.c.Size(), r.cfg.BatchSize)
}

func (r *run) start() Start {
	return Start{Model: r.m, StepsPerEpoch: r.stepsPerEpoch(), TotalSteps: r.cfg.Epochs * r.stepsPerEpoch(),
		ResumedFrom: r.resumedFrom, ResumedFile: r.resumedFile, ResumedAtEpoch: r.epoch}
}

func (r *run) check() (err error) {
	r.hash, err = checkWeights(r.c, r.params, r.globalStep, r.hash)
	return err
}

// runEpoch trains the rest of epoch r.epoch, then evaluates.
func (r *run) runEpoch() error {
	shard := Shard(Permutation(r.cfg.Seed, r.epoch, r.train.Rows()), r.c.Rank(), r.c.Size())
	r.epochBegan, r.epochSamples, r.epochComm = r.now(), 0, r.ov.stats
	for s := r.stepInEpoch; s < r.stepsPerEpoch(); s++ {
		idx := shard[s*r.batch : min((s+1)*r.batch, len(shard))]
		stop, err := r.step(idx)
		if err != nil {
			return err
		}
		if stop != NoStop {
			return r.preempted(stop)
		}
		if r.cfg.CheckpointEvery > 0 && r.globalStep%r.cfg.CheckpointEvery == 0 {
			_, r.saveErr = r.checkpoint() // every rank stops on it after the next step
		}
	}
	return r.endEpoch()
}

// step trains on the samples idx and reports whether any rank was asked to
// stop: Cancel if any was asked to cancel, else Preempt if any was asked to
// stop, else NoStop.
func (r *run) step(idx []int) (StopReason, error) {
	if r.cfg.OnStepBegin != nil {
		r.cfg.OnStepBegin()
	}
	f := r.train.Features
	for i, j := range idx {
		copy(r.bx[i*f:(i+1)*f], r.train.Row(j))
		r.by[i] = r.train.Y[j]
	}
	extra, grad := r.buf[:nExtra], r.buf[nExtra:]
	loss, correct := r.m.LossGradEach(r.params, grad, r.bx[:len(idx)*f], r.by[:len(idx)], &r.ws, r.ov.ready)
	extra[xStop], extra[xCancel], extra[xSaveFailed] = 0, 0, 0
	if r.saveErr != nil {
		extra[xSaveFailed] = 1
	}
	switch r.stopReason() {
	case Preempt:
		extra[xStop] = 1
	case Cancel:
		extra[xStop], extra[xCancel] = 1, 1
	}
	extra[xLoss], extra[xCorrect], extra[xCount] = float32(loss), float32(correct), float32(len(idx))
	exposed := r.ov.stats.Exposed
	if err := r.ov.finish(); err != nil {
		return NoStop, fmt.Errorf("step %d: %w", r.globalStep+1, err)
	}
	if extra[xSaveFailed] > 0 {
		return NoStop, r.rank0Failed()
	}
	weights := r.params // to search for a non-finite one: the update saw one
	if r.opt.StepMean(r.params, grad, r.c.Size()) {
		weights = nil
	}
	r.ws.GradCleared = true
	r.globalStep++
	r.stepInEpoch++
	if err := r.finite("loss", float64(extra[xLoss])/float64(extra[xCount]), weights); err != nil {
		return NoStop, err
	}
	count := float64(extra[xCount])
	r.lossSum += float64(extra[xLoss])
	r.correct += float64(extra[xCorrect])
	r.samples += count
	r.epochSamples += count
	r.ranSamples += count
	if r.cfg.OnStep != nil {
		if err := r.cfg.OnStep(StepInfo{Epoch: r.epoch, GlobalStep: r.globalStep, Loss: float64(extra[xLoss]) / float64(extra[xCount]),
			Exposed: r.ov.stats.Exposed - exposed}); err != nil {
			return NoStop, err
		}
	}
	if r.cfg.CheckEvery > 0 && r.globalStep%r.cfg.CheckEvery == 0 {
		if err := r.check(); err != nil {
			return NoStop, err
		}
	}
	switch {
	case extra[xCancel] > 0:
		return Cancel, nil
	case extra[xStop] > 0:
		return Preempt, nil
	}
	return NoStop, nil
}

func (r *run) stopReason() StopReason {
	if r.cfg.Stop == nil {
		return NoStop
	}
	return r.cfg.Stop()
}

// preempted checkpoints and waits for every rank: under srun, a rank that
// exited first could get the others killed before the file is written. The
// wait is an allreduce that settles the reason once more: a cancel that
// reached any rank while the checkpoint was written (a SIGTERM just after
// a SIGUSR1, as a cancelled job's ranks can get them) makes the stop a
// cancel on every rank.
func (r *run) preempted(reason StopReason) error {
	_, r.saveErr = r.checkpoint()
	flags := []float32{0, 0} // any rank cancelled; rank 0's checkpoint failed
	if reason == Cancel || r.stopReason() == Cancel {
		flags[0] = 1
	}
	if r.saveErr != nil {
		flags[1] = 1
	}
	if err := r.c.AllreduceSum(flags); err != nil { // every rank's, so rank 0's after its checkpoint
		return cmp.Or(r.saveErr, err)
	}
	if flags[1] > 0 {
		return r.rank0Failed()
	}
	if flags[0] > 0 {
		reason = Cancel
	}
	e := &PreemptedError{Step: r.globalStep, Reason: reason}
	if r.cfg.CheckpointDir != "" {
		e.Checkpoint = filepath.Join(r.cfg.CheckpointDir, checkpointName(r.globalStep))
	}
	return e
}

// endEpoch evaluates the test set, reports and starts the next epoch.
func (r *run) endEpoch() error {
	trained := r.now().Sub(r.epochBegan) // samples/s of the steps alone, not the evaluation
	testLoss, testAcc, err := r.m.Evaluate(r.params, r.test)
	if err != nil {
		return err
	}
	if err := r.finite("test loss", testLoss, nil); err != nil {
		return err
	}
	info := EpochInfo{Epoch: r.epoch + 1, GlobalStep: r.globalStep,
		Loss: r.lossSum / max(r.samples, 1), TrainAcc: r.correct / max(r.samples, 1),
		TestLoss: testLoss, TestAcc: testAcc, Elapsed: r.now().Sub(r.began),
		Comm: CommStats{Total: r.ov.stats.Total - r.epochComm.Total, Exposed: r.ov.stats.Exposed - r.epochComm.Exposed}}
	if d := trained.Seconds(); d > 0 {
		info.SamplesPerSecond = r.epochSamples / d
	}
	r.epoch, r.stepInEpoch = r.epoch+1, 0
	r.lossSum, r.correct, r.samples = 0, 0, 0
	if r.cfg.OnEpoch != nil {
		return r.cfg.OnEpoch(info)
	}
	return nil
}

// finish checks the weights once more, evaluates, reports the result
// (OnEnd) and then checkpoints: what can still fail comes after the
// report. Every rank learns whether rank 0 got through both.
func (r *run) finish() (Result, error) {
	if err := r.check(); err != nil {
		return Result{}, err
	}
	loss, acc, err := r.m.Evaluate(r.params, r.test)
	if err != nil {
		return Result{}, err
	}
	if err := r.finite("test loss", loss, nil); err != nil { // a resumed run with every epoch done
		var nf *NonFiniteError
		errors.As(err, &nf)
		nf.Epoch = r.epoch
		return r.diverged(nf)
	}
	res := Result{Model: r.m, Params: slices.Clone(r.params), Epochs: r.epoch, Steps: r.globalStep,
		ResumedFrom: r.resumedFrom, TestLoss: loss, TestAcc: acc, Comm: r.ov.stats}
	if d := r.now().Sub(r.began).Seconds(); d > 0 {
		res.SamplesPerSecond = r.ranSamples / d
	}
	var endErr error
	if r.cfg.OnEnd != nil {
		endErr = r.cfg.OnEnd(res)
	}
	_, r.saveErr = r.checkpoint() // the last one: an earlier one that failed no longer matters
	if r.cfg.CheckpointDir != "" {
		// Nobody exits before the file is there, and nobody is left to
		// find a lost connection when rank 0 could not write it.
		failed := []float32{0}
		if r.saveErr != nil || endErr != nil {
			failed[0] = 1
		}
		if err := r.c.AllreduceSum(failed); err != nil {
			return Result{}, cmp.Or(endErr, r.saveErr, err)
		}
		if failed[0] > 0 && endErr == nil {
			return Result{}, r.rank0Failed()
		}
	}
	if endErr != nil {
		return Result{}, endErr
	}
	return res, nil
}

// finite returns a *NonFiniteError for the step just taken when v (what)
// or a weight of params is NaN or infinite. Every rank has the same v and
// params, so every rank stops at the same step.
func (r *run) finite(what string, v float64, params []float32) error {
	if v-v == 0 { // not NaN nor ±Inf
		what = "weights"
		i := slices.IndexFunc(params, func(p float32) bool { return p-p != 0 })
		if i < 0 {
			return nil
		}
		v = float64(params[i])
	}
	return &NonFiniteError{Divergence{Step: r.globalStep, Epoch: r.epoch + 1, What: what,
		Value: strconv.FormatFloat(v, 'g', -1, 64)}}
}

// diverged ends a run that diverged: what it got to is reported (OnEnd),
// without weights or test figures, and nf is returned with it. Nothing is
// checkpointed: the weights are not numbers any more.
func (r *run) diverged(nf *NonFiniteError) (Result, error) {
	res := Result{Model: r.m, Epochs: r.epoch, Steps: r.globalStep, ResumedFrom: r.resumedFrom, Diverged: &nf.Divergence}
	if d := r.now().Sub(r.began).Seconds(); d > 0 {
		res.SamplesPerSecond = r.ranSamples / d
	}
	if r.cfg.OnEnd != nil {
		if err := r.cfg.OnEnd(res); err != nil {
			return res, err
		}
	}
	return res, nf
}

// rank0Failed is the error of a run whose rank 0 failed to checkpoint
// (or to report, at the end): rank 0's own error there, on the others one
// that sends the reader to it.
func (r *run) rank0Failed() error {
	if r.c.Rank() == 0 && r.saveErr != nil {
		return r.saveErr
	}
	return &PeerFailedError{Rank: 0, Step: r.globalStep}
}

// header is the checkpoint metadata of the current state.
func (r *run) header() CheckpointHeader {
	return CheckpointHeader{Epoch: r.epoch, StepInEpoch: r.stepInEpoch, GlobalStep: r.globalStep,
		WorldSize: r.c.Size(), Seed: r.cfg.Seed, BatchSize: r.cfg.BatchSize,
		LR: r.cfg.LR, Momentum: r.cfg.Momentum, WeightDecay: r.cfg.WeightDecay, Epochs: r.cfg.Epochs,
		ModelSizes: r.m.Sizes, TrainRows: r.train.Rows(), Features: r.train.Features, Classes: r.m.Sizes[len(r.m.Sizes)-1],
		EpochLossSum: r.lossSum, EpochCorrect: r.correct, EpochSamples: r.samples}
}

// checkpoint writes the state on rank 0 (the others return at once).
func (r *run) checkpoint() (string, error) {
	if r.cfg.CheckpointDir == "" || r.c.Rank() != 0 {
		return "", nil
	}
	path, err := r.dir.save(&Checkpoint{Header: r.header(), Params: r.params, Momentum: r.opt.Buf})
	if err != nil {
		return "", fmt.Errorf("checkpoint at step %d: %w", r.globalStep, err)
	}
	return path, nil
}

// resume loads the newest valid checkpoint. Every rank reads it (the
// directory is shared, or the same on one machine): no broadcast of the
// model. Should ranks read different files (a node-local directory), the
// weight check that follows fails.
func (r *run) resume() error {
	if r.cfg.CheckpointDir == "" {
		return nil
	}
	ck, path, err := r.dir.loadLatest()
	if err != nil || ck == nil {
		return err
	}
	if err := r.compatible(ck.Header, path); err != nil {
		return err
	}
	if len(ck.Params) != len(r.params) {
		return &CorruptError{File: path, Err: fmt.Errorf("%d parameters for a model of %d", len(ck.Params), len(r.params))}
	}
	h := ck.Header
	copy(r.params, ck.Params)
	copy(r.opt.Buf, ck.Momentum)
	r.epoch, r.stepInEpoch, r.globalStep = h.Epoch, h.StepInEpoch, h.GlobalStep
	r.lossSum, r.correct, r.samples = h.EpochLossSum, h.EpochCorrect, h.EpochSamples
	r.resumedFrom, r.resumedFile = h.GlobalStep, path
	return nil
}

// compatible refuses a checkpoint this run cannot continue exactly: another
// model, data, world size (no resharding), batch size or seed (another
// sample order). Learning rate, momentum, weight decay and epochs may change.
func (r *run) compatible(h CheckpointHeader, path string) error {
	want := r.header()
	for _, f := range []struct{ what, have, got string }{
		{"model sizes", fmt.Sprint(h.ModelSizes), fmt.Sprint(want.ModelSizes)},
		{"data shape (rows × features, classes)", shape(h), shape(want)},
		{"world size", strconv.Itoa(h.WorldSize), strconv.Itoa(want.WorldSize)},
		{"batch size", strconv.Itoa(h.BatchSize), strconv.Itoa(want.BatchSize)},
		{"seed", strconv.FormatUint(h.Seed, 10), strconv.FormatUint(want.Seed, 10)},
	} {
		if f.have != f.got {
			return &IncompatibleError{File: path, What: f.what, Have: f.have, Got: f.got}
		}
	}
	if h.StepInEpoch > r.stepsPerEpoch() {
		return &CorruptError{File: path, Err: fmt.Errorf("step %d of an epoch of %d steps", h.StepInEpoch, r.stepsPerEpoch())}
	}
	return nil
}

func shape(h CheckpointHeader) string {
	return fmt.Sprintf("%d×%d, %d classes", h.TrainRows, h.Features, h.Classes)
}
