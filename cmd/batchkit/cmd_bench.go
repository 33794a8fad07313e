package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/internal/closed"
	"github.com/batchkit/batchkit/internal/flagvalues"
	"github.com/batchkit/batchkit/internal/infile"
	"github.com/batchkit/batchkit/internal/outfile"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/bench"
	"github.com/batchkit/batchkit/trainer/collective"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench",
		Usage:     "measure allreduce, broadcast, allgather and reducescatter, nccl-tests style",
		ArgsUsage: "[RESULTS.jsonl...]",
		Description: `Run by every rank of a job (batchkit run, mpirun, srun), bench sweeps message sizes from
--min-bytes to --max-bytes in ×2 steps. For each size every rank runs warm-up iterations, a
barrier and the timed iterations; rank 0 prints one row: the ranks' mean, fastest and slowest
time per operation, algbw = bytes / time and busbw = algbw × factor, in GB/s (1e9 B/s):
   allreduce 2(n-1)/n, allgather and reducescatter (n-1)/n, broadcast 1, and 1 for one rank.
Each size is then checked once: every element exact, and the same on every rank (exit 1 if not).

Sizes and schedule (the same in trainer/bench/reference's C and gloo programs):
   bytes is each rank's buffer for allreduce (out of place, sum) and broadcast (root 0), the
   gathered buffer for allgather and the input buffer for reducescatter.
   bytes <= 64 KiB: 100 warm-up, 1000 timed; <= 1 MiB: 20, 200; <= 16 MiB: 5, 50; larger: 2, 20.
   --iters N times N iterations after max(1, N/10) warm-up ones.
Sizes take K, KiB, M, MiB, G or GiB (all binary: 1K = 1024).

--format json prints one object per size: op, backend (tcp, mpi, self), mpi_library (with
mpi), label, dtype, ranks, bytes, count, iters, warmup, avg_us, min_us, max_us, algbw_gbs,
busbw_gbs. A progress bar is shown on rank 0 when stderr is a terminal.

Given RESULTS files (JSON lines of bench --format json or of the references, - for stdin;
batchkit run's "[N] " prefixes are fine), bench runs nothing: it prints them, plots them (--plot, one line per
backend or label) or compares them with --baseline.

Examples:
   batchkit run -n 2 -- batchkit bench --backend tcp
   batchkit run -n 4 -- batchkit bench --op allgather --max-bytes 16MiB --format json > tcp.jsonl
   batchkit run -n 2 -- python3 trainer/bench/reference/gloo_bench.py > gloo.jsonl
   batchkit bench --baseline gloo.jsonl tcp.jsonl         # size by size: latency and busbw ratio
   batchkit bench --plot busbw.png tcp.jsonl gloo.jsonl`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "op", Value: string(bench.Allreduce), Usage: "operation: " + closed.Join(bench.Collectives)},
			flagvalues.With(&cli.StringFlag{Name: "backend", Value: string(collective.Auto), Usage: "collective backend: auto (mpi under an MPI launcher when built with MPI, else tcp), " + closed.Join(collective.Kinds[1:])}, flagvalues.List(collective.Kinds)),
			&cli.StringFlag{Name: "min-bytes", Value: "8", Usage: "smallest message `SIZE`"},
			&cli.StringFlag{Name: "max-bytes", Value: "64MiB", Usage: "largest message `SIZE`"},
			&cli.IntFlag{Name: "iters", Usage: "timed iterations for every size (warm-up max(1, `N`/10))", DefaultText: "by size, see the schedule above"},
			&cli.StringFlag{Name: "dtype", Value: "float32", Usage: "element type: float32 or float64"},
			flagvalues.With(&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: string(bench.Text), Usage: "text or json"}, flagvalues.List(bench.Formats)),
			&cli.DurationFlag{Name: "timeout", Value: collective.DefaultTimeout, Usage: "how long a collective waits for a silent peer (tcp)"},
			&cli.DurationFlag{Name: "rendezvous-timeout", Value: collective.DefaultRendezvousTimeout, Usage: "how long the ranks wait for each other at start-up (tcp)"},
			&cli.StringFlag{Name: "plot", Usage: "also write bus bandwidth against size to `FILE` (.png, .svg or .pdf; a regular file or a link to one; an existing file is refused without --force)"},
			&cli.BoolFlag{Name: "force", Usage: "let --plot replace an existing file (its mode and owner are kept)"},
			&cli.StringFlag{Name: "baseline", Usage: "compare with the results in `FILE`, size by size (same op, dtype and ranks)"},
			&cli.BoolFlag{Name: "best", Usage: "with result files holding several runs of the same series: keep each size's fastest (best of N)"},
			&cli.StringFlag{Name: "label", Usage: "name of this run in the JSON results and plot legends (default: the backend)"},
		},
		// A bad flag value is one line on stderr, not the help on stdout.
		OnUsageError: onUsageError,
		Action:       benchAction,
	}
}

// runOnlyFlags make no sense when bench only reads result files.
var runOnlyFlags = []string{"op", "backend", "min-bytes", "max-bytes", "iters", "dtype", "timeout", "rendezvous-timeout", "label"}

func benchAction(c *cli.Context) error {
	format, err := bench.ParseFormat(c.String("format"))
	if err != nil {
		return usagef("invalid --format %q: want text or json", c.String("format"))
	}
	if err := checkPlotFlags(c); err != nil {
		return err
	}
	var baseline []bench.Result
	if c.IsSet("baseline") {
		if baseline, err = readResultFile(c.String("baseline"), c.App.Reader); err != nil {
			return usagef("invalid --baseline: %v", err)
		}
	}
	if c.Args().Len() > 0 {
		return benchFiles(c, baseline, format)
	}
	return benchRun(c, baseline, format)
}

// checkPlotFlags: --plot may not overwrite its inputs, --force is for --plot.
func checkPlotFlags(c *cli.Context) error {
	if !c.IsSet("plot") {
		if c.IsSet("force") {
			return usagef("--force is for --plot: it lets the plot replace an existing file")
		}
		return nil
	}
	inputs := c.Args().Slice()
	if c.IsSet("baseline") {
		inputs = append(inputs, c.String("baseline"))
	}
	return checkPlotPath(c.String("plot"), inputs, c.Bool("force"))
}

// benchFiles prints, plots or compares result files: it runs nothing.
func benchFiles(c *cli.Context, baseline []bench.Result, format bench.Format) error {
	files := c.Args().Slice()
	for _, f := range runOnlyFlags {
		if c.IsSet(f) {
			return usagef("--%s is for a run; with result files bench runs nothing (it prints, plots or compares them)", f)
		}
	}
	for _, f := range files {
		if strings.HasPrefix(f, "-") && f != "-" {
			return usagef("flags go before the result files: %s", f)
		}
	}
	var results []bench.Result
	for _, f := range files {
		rs, err := readResultFile(f, c.App.Reader)
		if err != nil {
			return badInput(err)
		}
		results = append(results, rs...)
	}
	if c.Bool("best") {
		results, baseline = bench.Best(results), bench.Best(baseline)
	}
	return report(c, results, baseline, format, c.String("plot"), false)
}

// benchRun measures on this rank's world; rank 0 reports.
func benchRun(c *cli.Context, baseline []bench.Result, format bench.Format) error {
	if c.IsSet("best") {
		return usagef("--best is for result files: it merges runs that were already made")
	}
	opts, kind, err := benchOptions(c, format)
	if err != nil {
		return err
	}
	if baseline != nil && !hasOpDType(baseline, opts) {
		return usagef("invalid --baseline %s: no %s %s results to compare with", c.String("baseline"), opts.Op, opts.DType)
	}
	topo, err := detect.Detect(os.Getenv, detect.Options{Hostname: hostname()})
	if err != nil {
		return badInput(err)
	}
	// Before Init: no rank allocates until every rank has passed this.
	if err := checkMemory(c.String("max-bytes"), opts, topo, memAvailable()); err != nil {
		return err
	}
	comm, err := initComm(c, collective.Config{
		Topology: topo, Backend: kind, Getenv: os.Getenv,
		Timeout: c.Duration("timeout"), RendezvousTimeout: c.Duration("rendezvous-timeout"),
	})
	if err != nil {
		return err
	}
	defer comm.Close()
	if comm.Rank() == 0 && isTerminal(c.App.ErrWriter) {
		opts.Progress = c.App.ErrWriter
	}
	results, err := bench.Run(comm, c.App.Writer, opts)
	if errors.Is(err, bench.ErrNoSizes) {
		return badInput(err)
	}
	if err != nil || comm.Rank() != 0 {
		return err
	}
	return report(c, results, baseline, format, c.String("plot"), true)
}

// benchOptions validates the run's flags: one line naming the flag, exit 2.
func benchOptions(c *cli.Context, format bench.Format) (bench.Options, collective.Kind, error) {
	opts := bench.Options{Format: format, Label: c.String("label")}
	var err error
	if opts.Op, err = bench.ParseCollective(c.String("op")); err != nil {
		return opts, "", usagef("invalid --op %q: want one of %s", c.String("op"), closed.Join(bench.Collectives))
	}
	kind, err := collective.ParseKind(c.String("backend"))
	if err != nil {
		return opts, "", usagef("invalid --backend %q: want one of %s", c.String("backend"), closed.Join(collective.Kinds))
	}
	if opts.DType, err = bench.ParseDType(c.String("dtype")); err != nil {
		return opts, "", usagef("invalid --dtype %q: want float32 or float64", c.String("dtype"))
	}
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"min-bytes", &opts.MinBytes}, {"max-bytes", &opts.MaxBytes}} {
		n, err := bench.ParseSize(c.String(f.name))
		if err != nil {
			return opts, "", usagef("invalid --%s: %v", f.name, err)
		}
		if n < 1 {
			return opts, "", usagef("invalid --%s %s: must be at least 1 byte", f.name, c.String(f.name))
		}
		*f.dst = n
	}
	switch {
	case opts.MaxBytes > bench.MaxSize:
		return opts, "", usagef("invalid --max-bytes %s: at most %s", c.String("max-bytes"), bench.FormatSize(bench.MaxSize))
	case opts.MaxBytes < opts.MinBytes:
		return opts, "", usagef("invalid --max-bytes %s: smaller than --min-bytes %s", c.String("max-bytes"), c.String("min-bytes"))
	}
	if c.IsSet("iters") {
		if opts.Iters = c.Int("iters"); opts.Iters < 1 {
			return opts, "", usagef("invalid --iters %d: must be at least 1", opts.Iters)
		}
	}
	for _, f := range []string{"timeout", "rendezvous-timeout"} {
		if t := c.Duration(f); t <= 0 {
			return opts, "", usagef("invalid --%s %v: must be positive", f, t)
		}
	}
	return opts, kind, nil
}

// checkPlotPath refuses, before any run, a plot that could not be written or
// would replace a file without force (never one of the inputs: that would
// lose the results it draws), or what is not a regular file (outfile.Check).
func checkPlotPath(path string, inputs []string, force bool) error {
	if _, err := bench.PlotFormat(path); err != nil {
		return usagef("invalid --plot %v", err)
	}
	var nre *outfile.NotRegularError
	if err := outfile.Check(path); errors.As(err, &nre) {
		return usagef("invalid --plot %q: is %s, not a regular file", path, nre.Kind)
	}
	if fi, err := os.Stat(path); err == nil {
		for _, in := range inputs {
			if ii, err := os.Stat(in); err == nil && os.SameFile(fi, ii) {
				return usagef("invalid --plot %q: it is the result file %s, which the plot would replace", path, in)
			}
		}
		if !force {
			return usagef("invalid --plot %q: file exists (use --force to replace it)", path)
		}
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return usagef("invalid --plot %q: no directory %s", path, dir)
	}
	if err := syscall.Access(dir, accessWrite); err != nil {
		return usagef("invalid --plot %q: cannot write in %s: %v", path, dir, err)
	}
	return nil
}

// refused is outfile's refusal of a destination, which is the user's to
// fix (exit 2) even after a run: checkPlotPath saw the path before the run,
// but it may have changed since, and an owner cannot be checked ahead.
func refused(err error) bool {
	var (
		nre *outfile.NotRegularError
		oe  *outfile.OwnerError
	)
	return errors.As(err, &nre) || errors.As(err, &oe)
}

// accessWrite is access(2)'s W_OK.
const accessWrite = 0x2

// checkMemory refuses a sweep whose buffers do not fit in the node's
// available memory (avail bytes; 0 when unknown), shared by its ranks: the
// OOM killer would end them without a word.
func checkMemory(maxFlag string, opts bench.Options, topo topology.Topology, avail int64) error {
	need := bench.BufferBytes(opts.Op, opts.DType, topo.WorldSize, opts.MinBytes, opts.MaxBytes)
	node := need * int64(max(topo.LocalWorldSize, 1))
	if avail <= 0 || node <= avail {
		return nil
	}
	here := ""
	if topo.LocalWorldSize > 1 {
		here = fmt.Sprintf(", %s for the %d ranks on this node", bench.FormatSize(node), topo.LocalWorldSize)
	}
	return usagef("invalid --max-bytes %s: the %s buffers take %s per rank%s, and this node has %s available",
		maxFlag, opts.Op, bench.FormatSize(need), here, bench.FormatSize(avail))
}

// memAvailable is MemAvailable from /proc/meminfo in bytes, 0 if unknown.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// readResultFile reads JSON result lines from path, or from stdin for "-".
func readResultFile(path string, stdin io.Reader) ([]bench.Result, error) {
	if path == "-" {
		return bench.ReadResults(stdin, "stdin")
	}
	b, err := infile.Read(path, maxResultFile)
	if err != nil {
		return nil, infile.Named(path, err)
	}
	return bench.ReadResults(bytes.NewReader(b), path)
}

// maxResultFile bounds a result file: a sweep of every size and collective
// is a few hundred kilobytes; /dev/zero or a wrong path would never end.
const maxResultFile = 64 << 20

func hasOpDType(rs []bench.Result, opts bench.Options) bool {
	for _, r := range rs {
		if r.Op == string(opts.Op) && r.DType == opts.DType.String() {
			return true
		}
	}
	return false
}

// report prints, plots and compares results on rank 0 (the plot first: a
// comparison that finds nothing in common must not cost it). ran: the results
// are this run's (already printed), not files'.
func report(c *cli.Context, results, baseline []bench.Result, format bench.Format, plotPath string, ran bool) error {
	out := c.App.Writer
	if !ran && baseline == nil && plotPath == "" {
		w := bench.NewWriter(out, format)
		for _, r := range results {
			if err := w.Write(r); err != nil {
				return err
			}
		}
		return nil
	}
	if plotPath != "" {
		if err := bench.PlotFile(plotPath, append(results, baseline...), c.Bool("force")); err != nil {
			if !ran || refused(err) {
				return badInput(fmt.Errorf("--plot %s: %w", plotPath, err))
			}
			return fmt.Errorf("--plot %s: %w", plotPath, err)
		}
	}
	if baseline != nil {
		cs, err := bench.Compare(results, baseline)
		if err != nil {
			return badInput(err)
		}
		if ran && format == bench.Text {
			fmt.Fprintln(out)
		}
		if err := bench.WriteComparisons(out, cs, format); err != nil {
			return err
		}
	}
	return nil
}
