package job

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/batchkit/batchkit/trainer"
	"github.com/batchkit/batchkit/trainer/health"
)

// report is rank 0's output: progress, epoch lines, metrics, summary.
type report struct {
	setup       *Setup
	out, log    io.Writer // the summary; epoch lines (stderr with --format json)
	backend     string
	world       int
	bar         bool
	progress    *progressbar.ProgressBar
	metrics     io.Writer    // --metrics, nil without
	closeMetric func() error // nil for a stream
	hist        History
	resumedFrom int
	epochs      int
	health      *health.Report // --report's, collected before the summary
	buckets     string         // Setup.Buckets' line
}

func (r *report) start(st trainer.Start) error {
	r.resumedFrom, r.epochs = st.ResumedFrom, r.setup.Train.Epochs
	m := st.Model
	fmt.Fprintf(r.log, "train: MLP %s (%d parameters) on %s: %d train / %d test rows; %d rank(s) over %s, batch %d per rank, %d steps per epoch\n",
		joinInts(m.Sizes, "-"), m.NumParams(), r.setup.DataName, r.setup.TrainSet.Rows(), r.setup.TestSet.Rows(),
		r.world, r.backend, r.setup.Train.BatchSize, st.StepsPerEpoch)
	fmt.Fprintf(r.log, "train: %s\n", r.setup.GemmLine())
	if r.world > 1 {
		fmt.Fprintf(r.log, "train: %s\n", r.buckets)
	}
	if st.ResumedFrom > 0 {
		fmt.Fprintf(r.log, "train: %s\n", trainer.ResumeLine(st, r.epochs))
	} else if dir := r.setup.Train.CheckpointDir; dir != "" {
		fmt.Fprintf(r.log, "train: no checkpoint in %s: starting from step 0\n", dir)
	}
	if d := r.setup.metricsFile; d != nil {
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

func (r *report) step(s trainer.StepInfo) error {
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
	// This rank's gradient allreduces in the epoch's steps: their time,
	// and the part the steps waited for after the backward pass.
	CommSeconds        float64 `json:"comm_s"`
	CommExposedSeconds float64 `json:"comm_exposed_s"`
}

func (r *report) epoch(e trainer.EpochInfo) error {
	r.hist.Epochs = append(r.hist.Epochs, e)
	if r.progress != nil {
		r.progress.Clear()
	}
	fmt.Fprintf(r.log, "epoch %3d/%d  step %6d  loss %.4f  train_acc %.4f  test_acc %.4f  %.0f samples/s\n",
		e.Epoch, r.epochs, e.GlobalStep, e.Loss, e.TrainAcc, e.TestAcc, e.SamplesPerSecond)
	if r.metrics == nil {
		return nil
	}
	b, err := json.Marshal(epochLine{Run: r.setup.metricsFile.run, Epoch: e.Epoch, Step: e.GlobalStep, Loss: e.Loss, TrainAcc: e.TrainAcc,
		TestAcc: e.TestAcc, TestLoss: e.TestLoss, SamplesPerSecond: e.SamplesPerSecond, Elapsed: e.Elapsed.Seconds(),
		CommSeconds: e.Comm.Total.Seconds(), CommExposedSeconds: e.Comm.Exposed.Seconds()})
	if err == nil {
		_, err = r.metrics.Write(append(b, '\n'))
	}
	if err != nil {
		return fmt.Errorf("--metrics %s: %w", r.setup.metricsFile.path, err)
	}
	return nil
}

func (r *report) close() error {
	if r.progress != nil {
		r.progress.Finish()
	}
	if r.closeMetric != nil {
		if err := r.closeMetric(); err != nil {
			return fmt.Errorf("--metrics %s: %w", r.setup.metricsFile.path, err)
		}
	}
	return nil
}

// Summary is the end of a run as --format json prints it. A run that
// diverged has no test figures (null) nor weights, and says where it
// diverged.
type Summary struct {
	TestAccuracy     *float64            `json:"test_accuracy"`
	TestLoss         *float64            `json:"test_loss"`
	Epochs           int                 `json:"epochs"`
	Steps            int                 `json:"steps"`
	WorldSize        int                 `json:"world_size"`
	Backend          string              `json:"backend"`
	SamplesPerSecond float64             `json:"samples_per_second"`
	ResumedFromStep  int                 `json:"resumed_from_step"`
	WeightsSHA256    string              `json:"weights_sha256,omitempty"`
	ElapsedSeconds   float64             `json:"elapsed_seconds"`
	Model            []int               `json:"model"`
	Parameters       int                 `json:"parameters"`
	BLAS             string              `json:"blas"`         // the GEMM library (gemm)
	BLASThreads      int                 `json:"blas_threads"` // its threads a call
	Plot             string              `json:"plot,omitempty"`
	Diverged         *trainer.Divergence `json:"diverged,omitempty"`
	Health           *health.Report      `json:"health,omitempty"` // --report
}

func (r *report) summary(res trainer.Result, elapsed time.Duration, plot string) error {
	s := Summary{Epochs: res.Epochs, Steps: res.Steps,
		WorldSize: r.world, Backend: r.backend, SamplesPerSecond: res.SamplesPerSecond, ResumedFromStep: res.ResumedFrom,
		ElapsedSeconds: elapsed.Seconds(), Model: res.Model.Sizes, Parameters: res.Model.NumParams(), Plot: plot, Diverged: res.Diverged,
		BLAS: r.setup.Train.Gemm.Name(), BLASThreads: r.setup.Train.Gemm.Threads(), Health: r.health}
	if res.Diverged == nil {
		s.TestAccuracy, s.TestLoss, s.WeightsSHA256 = &res.TestAcc, &res.TestLoss, trainer.WeightsSHA256(res.Params)
	} else if !r.setup.JSON {
		return nil // the error line says where it diverged
	}
	if r.setup.JSON {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(r.out, "%s\n", b)
		return err
	}
	fmt.Fprintf(r.out, "test accuracy %.4f (loss %.4f) after %d epochs, %d steps on %d rank(s), %.1f s, %.0f samples/s\nweights sha256 %s\n",
		res.TestAcc, res.TestLoss, s.Epochs, s.Steps, s.WorldSize, s.ElapsedSeconds, s.SamplesPerSecond, s.WeightsSHA256)
	if plot != "" {
		fmt.Fprintf(r.out, "plot: %s\n", plot)
	}
	if r.health != nil {
		return r.health.WriteText(r.out)
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
