// Package job is batchkit train as a library: one rank's run of the
// trainer from the command's flags, in three calls, so that the command
// only parses flags, calls them and turns the result into an exit code.
//
//   - Config.Setup (job.go): the flags checked and the data read, before
//     anything else; Defaults holds the flags' default values.
//   - Setup.Check (check.go): what needs the rank and world: the
//     checkpoint directory, rank 0's --plot and --metrics, refused before
//     any rank connects.
//   - Run (run.go): the training on a trainer.Comm, and rank 0's report
//     (report.go: progress, epoch lines, the summary), the --metrics file
//     (metrics.go: resumed runs continue their own file) and the plot.
//
// An error that is the user's to fix (a flag, the data, a path) is
// errors.Is(err, ErrInvalid); the trainer's own error types pass through.
// The package changes no process-wide state: signals are the caller's,
// which hands in their stop request. The one exception is --blas openblas:
// OpenBLAS has only a process-wide thread count, which Setup sets to the
// rank's (gemm.Open).
package job

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/internal/closed"
	"github.com/batchkit/batchkit/trainer"
	"github.com/batchkit/batchkit/trainer/collective"
	"github.com/batchkit/batchkit/trainer/gemm"
)

// Config is a run of batchkit train as its flags give it, before any check.
type Config struct {
	Epochs, BatchSize         int
	LR, Momentum, WeightDecay float64
	Seed                      uint64
	Hidden                    string // layer sizes, comma-separated; "" for none
	Data                      string // a CSV file; "" for the embedded digits
	Backend                   string // a collective.Kind
	CheckpointDir             string
	CheckpointEvery           int
	CheckEvery                int
	BucketMB                  string // gradient bucket size in MiB, 0: one allreduce after the backward pass; "auto": AutoBucketMB
	Metrics                   string // JSON lines, one per epoch; "-" for stdout
	Plot                      string // .png, .svg or .pdf
	Force                     bool   // Metrics and Plot may replace a file
	Format                    string // text or json
	Report                    bool   // end with the health report (trainer/health)
	// BLAS is the GEMM library (gemm.Names: auto, the best built in).
	BLAS string
	// Getenv reads OMP_NUM_THREADS, the BLAS's thread count (nil: os.Getenv).
	Getenv func(string) string
}

// Defaults are the values of the flags not given.
var Defaults = Config{Epochs: 20, BatchSize: 32, LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4, Seed: 1,
	Hidden: "64", Backend: string(collective.Auto), CheckpointEvery: 100, CheckEvery: 100, BucketMB: "auto", Format: "text", BLAS: gemm.Auto}

// Formats are --format's values: text for people, json one summary
// object (shell completion offers them).
var Formats = []string{"text", "json"}

// ErrInvalid marks an error that is the user's to fix: a flag, the data, a
// path refused.
var ErrInvalid = errors.New("invalid input")

type invalidError struct{ err error }

func (e *invalidError) Error() string   { return e.err.Error() }
func (e *invalidError) Unwrap() error   { return e.err }
func (e *invalidError) Is(t error) bool { return t == ErrInvalid }

func invalid(format string, a ...any) error { return &invalidError{fmt.Errorf(format, a...)} }

// Setup is a Config checked, with its data read: everything the flags
// decide, known before any rank connects.
type Setup struct {
	Config      Config
	Train       trainer.Config // the loop's, without its callbacks
	Kind        collective.Kind
	JSON        bool
	DataName    string
	TrainSet    *trainer.Dataset
	TestSet     *trainer.Dataset
	Sizes       []int        // the model's layer sizes
	bucketAuto  bool         // --bucket-mb auto: Run sets Train.BucketBytes (Buckets)
	Node        string       // this rank's node in the health report (health.NodeName)
	metricsFile *metricsFile // rank 0's --metrics (Check), nil without
	// gemmThreadsFrom: where Train.Gemm's thread count came from.
	gemmThreadsFrom string
	// share is this rank's CPUs (Check): its BLAS threads (shareNode)
	// and --bucket-mb auto (Buckets) follow it.
	share cpuShare
	// readCPUs reads this process's CPUs for readShare (nil: envsetup.ReadCPUs("/")).
	readCPUs func() (envsetup.CPUSet, error)
}

// Setup checks c and reads the data: an error is one line naming the
// flag, and ErrInvalid.
func (c Config) Setup() (*Setup, error) {
	s := &Setup{Config: c, DataName: "digits"}
	if !slices.Contains(Formats, c.Format) {
		return nil, invalid("invalid --format %q: want %s", c.Format, strings.Join(Formats, " or "))
	}
	s.JSON = c.Format == "json"
	var err error
	if s.Kind, err = collective.ParseKind(c.Backend); err != nil {
		return nil, invalid("invalid --backend %q: want one of %s", c.Backend, closed.Join(collective.Kinds))
	}
	hidden, err := parseHidden(c.Hidden)
	if err != nil {
		return nil, invalid("invalid --hidden %q: %v", c.Hidden, err)
	}
	var hyper [3]float32 // as given, or refused: float32 would change them
	for i, h := range []struct {
		name string
		v    float64
	}{{"lr", c.LR}, {"momentum", c.Momentum}, {"weight-decay", c.WeightDecay}} {
		if hyper[i], err = trainer.Float32(h.v); err != nil {
			return nil, invalid("invalid --%s %v: %v", h.name, h.v, err)
		}
	}
	mb, err := parseBucketMB(c.BucketMB)
	if err != nil {
		return nil, err
	}
	s.bucketAuto = c.BucketMB == "auto"
	s.Train = trainer.Config{Hidden: hidden, Epochs: c.Epochs, BatchSize: c.BatchSize,
		LR: hyper[0], Momentum: hyper[1], WeightDecay: hyper[2],
		Seed: c.Seed, CheckEvery: c.CheckEvery, CheckpointDir: c.CheckpointDir, CheckpointEvery: c.CheckpointEvery,
		BucketBytes: bucketBytes(mb)}
	if err := s.Train.Validate(); err != nil {
		return nil, invalid("invalid flags: %v", err)
	}
	if s.Train.Gemm, s.gemmThreadsFrom, err = openGemm(c.BLAS, c.Getenv); err != nil {
		return nil, err
	}
	var d *trainer.Dataset
	if c.Data != "" {
		s.DataName = c.Data
		d, err = trainer.ReadDataFile(c.Data)
	} else {
		d, err = trainer.Digits()
	}
	if err != nil {
		return nil, &invalidError{err}
	}
	if s.TrainSet, s.TestSet, err = trainer.Split(d); err != nil {
		return nil, invalid("invalid --data %s: %v", s.DataName, err)
	}
	m, err := trainer.NewMLP(d.Features, hidden, d.Classes)
	if err != nil {
		return nil, invalid("invalid --hidden %q: %v", c.Hidden, err)
	}
	s.Sizes = m.Sizes
	return s, nil
}

// AutoBucketMB is --bucket-mb auto on a backend whose calls made beside
// compute wait without a CPU (collective.IdleWait: tcp, and mpi and ccl
// through their AllreduceIdle), when every rank has more than one CPU:
// DDP's first bucket. On a backend without (self), or where a rank has a
// single CPU, auto is 0: the backward pass and the buckets' calls would
// take turns on that CPU, so the overlap only adds calls (two quiet runs
// on this project's machine, 2 ranks on 2 cores: buckets 0.92-1.00× the
// step without, on every backend; docs/performance.md, "Gradient
// buckets"). Before mpi and ccl had AllreduceIdle, auto was 0 on them.
const AutoBucketMB = 1

// parseBucketMB reads --bucket-mb: "auto" (AutoBucketMB or 0: Buckets),
// or a size in MiB >= 0.
func parseBucketMB(v string) (float64, error) {
	if v == "auto" {
		return 0, nil
	}
	mb, err := strconv.ParseFloat(v, 64)
	if err != nil || !(mb >= 0) || math.IsInf(mb, 0) {
		return 0, invalid("invalid --bucket-mb %q: want auto or a size in MiB >= 0 (0: one allreduce after the backward pass)", v)
	}
	return mb, nil
}

// Buckets is the bucket size of a run on backend (a Comm's Backend())
// whose ranks have at fewest fewest CPUs each (0: unknown), and the line
// that says what it is and why: --bucket-mb's, or auto's.
func (s *Setup) Buckets(backend string, fewest int) (bytes int, line string) {
	flag := "--bucket-mb " + s.Config.BucketMB
	switch {
	case !s.bucketAuto:
		bytes = s.Train.BucketBytes
	case !collective.IdleWait(backend):
		flag += " on " + backend
	case fewest == 1:
		flag += ": a rank has 1 CPU, none to overlap on"
	default:
		bytes = bucketBytes(AutoBucketMB)
	}
	if bytes == 0 {
		return 0, "one allreduce after the backward pass (" + flag + ")"
	}
	return bytes, "gradient buckets of " + strconv.FormatFloat(float64(bytes)/(1<<20), 'g', 4, 64) + " MiB (" + flag + ")"
}

// fewestCPUs is the fewest CPUs a rank of comm has (mine is this rank's
// cpuShare.n), over the ranks that could read theirs; 0 when none could.
// Every rank calls it, whatever its --bucket-mb: the collectives must be
// the same on every rank before the trainer compares their flags.
func fewestCPUs(comm trainer.Comm, mine int) (int, error) {
	if comm.Size() == 1 {
		return mine, nil
	}
	all := make([]float64, comm.Size())
	if err := comm.Allgather([]float64{float64(mine)}, all); err != nil {
		return 0, err
	}
	fewest := 0
	for _, v := range all {
		if n := int(v); n > 0 && (fewest == 0 || n < fewest) {
			fewest = n
		}
	}
	return fewest, nil
}

// bucketBytes is mb MiB in bytes; above 1 TiB every model is one bucket.
func bucketBytes(mb float64) int { return int(math.Ceil(min(mb, 1<<20) * (1 << 20))) }

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
