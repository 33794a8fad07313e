package main

import (
	"context"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/doctor"
	"github.com/batchkit/batchkit/internal/flagvalues"
	"github.com/batchkit/batchkit/profile"
)

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check this node before a launch: profile, Slurm, mpirun, scripts, Intel MPI/oneCCL/libfabric, Python stack, topology, ports, cores",
		Description: `Each check answers OK, WARN, FAIL or SKIP with a fix. Runs on a login node or inside a job;
independent checks run at once and every external command has a timeout, so doctor never hangs.
What a command prints is bounded (one that prints over 1 MiB is stopped, as is a process it leaves
holding its output) and shown escaped: a tool's escape sequences cannot reach the terminal.
With an Intel profile (flavor intelmpi, CCL_* variables) or I_MPI_ROOT/CCL_ROOT set, the
intel-mpi, oneccl and libfabric checks find libmpi.so.12, libccl.so.1 and libfabric.so.1 as a
job's loader would, check that they load (ldd), report their versions, and fail when the launcher
is another build than the library, oneCCL's transport lacks what it needs or FI_PROVIDER names a
provider fi_info -l does not list; without them these checks print nothing.
Exit status 0 without FAIL, 1 with one, 2 for bad usage. The statuses are coloured on a terminal
unless NO_COLOR is set; --format json is for scripts.

Examples:
   batchkit doctor
   batchkit doctor --profile intel-oneccl --python /usr/bin/python3
   batchkit doctor --format json`,
		Flags: []cli.Flag{
			flagvalues.With(&cli.StringFlag{Name: "profile", Usage: "the profile to check (" + profileOrLocal + ")"}, profileNames),
			&cli.StringFlag{Name: "python", Usage: "the Python interpreter to probe (default python3 on PATH)"},
			flagvalues.With(&cli.StringFlag{Name: "format", Value: "text", Usage: "text or json"}, flagvalues.List(outputFormats)),
			&cli.DurationFlag{Name: "timeout", Value: doctor.DefaultTimeout, Usage: "limit for each external command"},
		},
		Action: runDoctor,
	}
}

// cclVersion is oneCCL's own version call (ccl::get_library_version) in a
// binary built with the ccl collective backend, nil in one without: doctor
// reads the version from the library found then. Set where the backend is
// compiled in.
var cclVersion func() string

func runDoctor(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("doctor takes no arguments, got %q", c.Args().First())
	}
	format := c.String("format")
	if format != "text" && format != "json" {
		return usagef("--format: want text or json, got %q", format)
	}
	timeout := c.Duration("timeout")
	if timeout <= 0 {
		return usagef("--timeout must be positive, got %s", timeout)
	}
	env := doctor.System(os.Getenv, hostname())
	env.Timeout, env.Python = timeout, c.String("python")
	env.CCLVersion = cclVersion
	env.ProfileName = c.String("profile")
	if env.ProfileName == "" {
		env.ProfileName = profile.DefaultName(os.Getenv)
	}
	// A profile that does not load is the profile check's FAIL, not a
	// usage error: finding it is doctor's job.
	env.Profile, env.ProfileErr = loadProfile(c, nil)
	// The checks' commands run concurrently, but mpirun's and Python's
	// wait for the profile's scripts to be sourced first (one timeout):
	// hence room for a few timeouts.
	ctx, cancel := context.WithTimeout(context.Background(), 3*timeout)
	defer cancel()
	results := doctor.Run(ctx, env, doctor.Checks())
	var err error
	if format == "json" {
		err = doctor.WriteJSON(c.App.Writer, results)
	} else {
		err = doctor.WriteText(c.App.Writer, results, useColor(c.App.Writer, os.Getenv))
	}
	if err != nil {
		return err
	}
	if doctor.Failed(results) {
		return &childExit{exitFailure}
	}
	return nil
}
