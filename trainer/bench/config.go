package bench

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/batchkit/batchkit/internal/closed"
	"github.com/batchkit/batchkit/internal/infile"
	"github.com/batchkit/batchkit/internal/nodemem"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective"
)

// Config is a run of batchkit bench as its flags give it, before any check:
// Options checks it. Defaults holds the flags' default values.
type Config struct {
	Op, Backend, DType string
	MinBytes, MaxBytes string // sizes as ParseSize reads them
	Iters              int    // with ItersSet: every size's timed iterations
	ItersSet           bool
	Label              string
	// Timeout and RendezvousTimeout are the TCP backend's
	// (collective.Config's).
	Timeout, RendezvousTimeout time.Duration
}

// Defaults are the values of the flags not given.
var Defaults = Config{
	Op: string(Allreduce), Backend: string(collective.Auto), DType: "float32",
	MinBytes: strconv.Itoa(DefaultMinBytes), MaxBytes: "64MiB", // DefaultMaxBytes
	Timeout: collective.DefaultTimeout, RendezvousTimeout: collective.DefaultRendezvousTimeout,
}

// Options checks c: the first problem is one line naming the flag
// (--op, --max-bytes ...), which is the user's to fix.
func (c Config) Options(format Format) (Options, collective.Kind, error) {
	opts := Options{Format: format, Label: c.Label}
	var err error
	if opts.Op, err = ParseCollective(c.Op); err != nil {
		return opts, "", fmt.Errorf("invalid --op %q: want one of %s", c.Op, closed.Join(Collectives))
	}
	kind, err := collective.ParseKind(c.Backend)
	if err != nil {
		return opts, "", fmt.Errorf("invalid --backend %q: want one of %s", c.Backend, closed.Join(collective.Kinds))
	}
	if opts.DType, err = ParseDType(c.DType); err != nil {
		return opts, "", fmt.Errorf("invalid --dtype %q: want float32 or float64", c.DType)
	}
	for _, f := range []struct {
		name, value string
		dst         *int64
	}{{"min-bytes", c.MinBytes, &opts.MinBytes}, {"max-bytes", c.MaxBytes, &opts.MaxBytes}} {
		n, err := ParseSize(f.value)
		if err != nil {
			return opts, "", fmt.Errorf("invalid --%s: %v", f.name, err)
		}
		if n < 1 {
			return opts, "", fmt.Errorf("invalid --%s %s: must be at least 1 byte", f.name, f.value)
		}
		*f.dst = n
	}
	switch {
	case opts.MaxBytes > MaxSize:
		return opts, "", fmt.Errorf("invalid --max-bytes %s: at most %s", c.MaxBytes, FormatSize(MaxSize))
	case opts.MaxBytes < opts.MinBytes:
		return opts, "", fmt.Errorf("invalid --max-bytes %s: smaller than --min-bytes %s", c.MaxBytes, c.MinBytes)
	}
	if c.ItersSet {
		if opts.Iters = c.Iters; opts.Iters < 1 {
			return opts, "", fmt.Errorf("invalid --iters %d: must be at least 1", opts.Iters)
		}
	}
	for _, f := range []struct {
		name string
		t    time.Duration
	}{{"timeout", c.Timeout}, {"rendezvous-timeout", c.RendezvousTimeout}} {
		if f.t <= 0 {
			return opts, "", fmt.Errorf("invalid --%s %v: must be positive", f.name, f.t)
		}
	}
	return opts, kind, nil
}

// CheckMemory refuses a sweep whose buffers do not fit in the node's
// available memory (avail bytes, nodemem.Available; 0 when unknown), shared
// by its ranks: the OOM killer would end them without a word. Call it
// before collective.Init, so that no rank allocates until every rank has
// passed it.
func CheckMemory(opts Options, topo topology.Topology, avail int64) error {
	need := BufferBytes(opts.Op, opts.DType, topo.WorldSize, opts.MinBytes, opts.MaxBytes)
	return nodemem.Check(fmt.Sprintf("the %s buffers", opts.Op), need, topo.LocalWorldSize, avail)
}

// ReadResultFile reads JSON result lines from path, or from stdin for "-".
func ReadResultFile(path string, stdin io.Reader) ([]Result, error) {
	if path == "-" {
		return ReadResults(stdin, "stdin")
	}
	b, err := infile.Read(path, maxResultFile)
	if err != nil {
		return nil, infile.Named(path, err)
	}
	return ReadResults(bytes.NewReader(b), path)
}

// maxResultFile bounds a result file: a sweep of every size and collective
// is a few hundred kilobytes; /dev/zero or a wrong path would never end.
const maxResultFile = 64 << 20

// HasOpDType says whether rs has results of opts' operation and element
// type, the ones a run with opts can be compared with.
func HasOpDType(rs []Result, opts Options) bool {
	for _, r := range rs {
		if r.Op == string(opts.Op) && r.DType == opts.DType.String() {
			return true
		}
	}
	return false
}
