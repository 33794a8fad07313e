package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/internal/closed"
	"github.com/batchkit/batchkit/internal/flagvalues"
	"github.com/batchkit/batchkit/internal/nodemem"
	"github.com/batchkit/batchkit/internal/plotfile"
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
			&cli.StringFlag{Name: "op", Value: bench.Defaults.Op, Usage: "operation: " + closed.Join(bench.Collectives)},
			flagvalues.With(&cli.StringFlag{Name: "backend", Value: bench.Defaults.Backend, Usage: "collective backend: auto (mpi under an MPI launcher when built with MPI, else tcp), " + closed.Join(collective.Kinds[1:])}, flagvalues.List(collective.Kinds)),
			&cli.StringFlag{Name: "min-bytes", Value: bench.Defaults.MinBytes, Usage: "smallest message `SIZE`"},
			&cli.StringFlag{Name: "max-bytes", Value: bench.Defaults.MaxBytes, Usage: "largest message `SIZE`"},
			&cli.IntFlag{Name: "iters", Usage: "timed iterations for every size (warm-up max(1, `N`/10))", DefaultText: "by size, see the schedule above"},
			&cli.StringFlag{Name: "dtype", Value: bench.Defaults.DType, Usage: "element type: float32 or float64"},
			flagvalues.With(&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: string(bench.Text), Usage: "text or json"}, flagvalues.List(bench.Formats)),
			&cli.DurationFlag{Name: "timeout", Value: bench.Defaults.Timeout, Usage: "how long a collective waits for a silent peer (tcp)"},
			&cli.DurationFlag{Name: "rendezvous-timeout", Value: bench.Defaults.RendezvousTimeout, Usage: "how long the ranks wait for each other at start-up (tcp)"},
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
		if baseline, err = bench.ReadResultFile(c.String("baseline"), c.App.Reader); err != nil {
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
	if err := plotfile.Check(c.String("plot"), inputs, c.Bool("force")); err != nil {
		return usagef("invalid --plot %v", err)
	}
	return nil
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
		rs, err := bench.ReadResultFile(f, c.App.Reader)
		if err != nil {
			return badInput(err)
		}
		results = append(results, rs...)
	}
	if c.Bool("best") {
		results, baseline = bench.Best(results), bench.Best(baseline)
	}
	return benchReport(c, results, baseline, format, c.String("plot"), false)
}

// benchRun measures on this rank's world; rank 0 reports.
func benchRun(c *cli.Context, baseline []bench.Result, format bench.Format) error {
	if c.IsSet("best") {
		return usagef("--best is for result files: it merges runs that were already made")
	}
	opts, kind, err := benchConfig(c).Options(format)
	if err != nil {
		return badInput(err)
	}
	if baseline != nil && !bench.HasOpDType(baseline, opts) {
		return usagef("invalid --baseline %s: no %s %s results to compare with", c.String("baseline"), opts.Op, opts.DType)
	}
	topo, err := detect.Detect(os.Getenv, detect.Options{Hostname: hostname()})
	if err != nil {
		return badInput(err)
	}
	// Before Init: no rank allocates until every rank has passed this.
	if err := bench.CheckMemory(opts, topo, memAvailable()); err != nil {
		return usagef("invalid --max-bytes %s: %v", c.String("max-bytes"), err)
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
	return benchReport(c, results, baseline, format, c.String("plot"), true)
}

// benchReport prints, plots and compares results on rank 0 (the plot first: a
// comparison that finds nothing in common must not cost it). ran: the results
// are this run's (already printed), not files'.
func benchReport(c *cli.Context, results, baseline []bench.Result, format bench.Format, plotPath string, ran bool) error {
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
			if !ran || plotfile.Refused(err) {
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

// memAvailable is what this process may still allocate, for bench's and
// train's memory checks (nodemem.Available); a variable for tests.
var memAvailable = nodemem.Available
