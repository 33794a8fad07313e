package main

// The configuration of the commands that read a site profile, in the order
// built-in defaults -> profile -> flags, as go-ethereum's makeConfigNode
// builds a node's: loadProfile resolves the profile (its built-in defaults
// and files) and puts the overriding flags on top; the profile's methods in
// profile/consumers.go build each consumer's input from the result
// (mpirun's defaults, the batch plan's, envsetup's; doctor reads the
// resolved profile); the command's own flags go over those.

import (
	"fmt"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/flagvalues"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/profile"
)

// What a command uses when no --profile names a profile, as its --profile
// flag's help says it; docs/reference/profiles.md ("Which profile a
// command uses") says the same, and TestProfileDefaults checks both
// against what the commands do.
var (
	profileOrLocal  = "default: $" + envvars.Profile + ", else " + profile.DefaultProfile
	profileOrDetect = "default: $" + envvars.Profile + ", else none: the MPI is detected on PATH"
	profileOrSource = "default: $" + envvars.Profile + ", else none: only --source"
	profileOnlyFlag = "default: none; $" + envvars.Profile + " is not read"
)

// profileFlags are the flags that select a profile and override its launch
// settings; shared by the commands that launch.
func profileFlags() []cli.Flag {
	return []cli.Flag{
		flagvalues.With(&cli.StringFlag{Name: "profile", Usage: "site profile `NAME` or file (" + profileOrLocal + ")"}, profileNames),
		flagvalues.With(&cli.StringFlag{Name: "flavor", Usage: "MPI flavor: openmpi, mpich, intelmpi or mvapich (profile: mpi.flavor)"}, flagvalues.List(mpirun.Flavors)),
		flagvalues.With(&cli.StringFlag{Name: "launcher", Usage: "mpirun, mpiexec or srun (profile: mpi.launcher)"}, flagvalues.List(mpirun.Programs)),
		&cli.StringFlag{Name: "mpirun", Usage: "launcher binary `PATH` (profile: mpi.binary)"},
	}
}

// loadProfile resolves the profile and puts the flags that override it on
// top, as the last layer.
func loadProfile(c *cli.Context, overrides map[string]string) (*profile.Resolved, error) {
	name := c.String("profile")
	fromEnv := name == "" && os.Getenv(envvars.Profile) != ""
	if name == "" {
		name = profile.DefaultName(os.Getenv)
	}
	r, err := profile.NewLoader(os.Getenv).Resolve(name)
	if err != nil {
		if fromEnv {
			err = fmt.Errorf("BATCHKIT_PROFILE=%s: %w", name, err)
		}
		return nil, badInput(err)
	}
	// In a fixed order, so that of two bad flags the same one is named.
	flags := make([]string, 0, len(overrides))
	for flag := range overrides {
		flags = append(flags, flag)
	}
	slices.Sort(flags)
	for _, flag := range flags {
		key := overrides[flag]
		if c.IsSet(flag) {
			if err := r.Set(key, c.String(flag), profile.CommandLine); err != nil {
				return nil, badInput(fmt.Errorf("--%s: %w", flag, err))
			}
		}
	}
	if err := r.Validate(); err != nil {
		return nil, badInput(err)
	}
	return r, nil
}

// The flags that override a profile's keys, by command: each is Set on the
// resolved profile as its top layer (profile.CommandLine), so that it is
// checked as the key is and a different flavor or launcher drops what the
// profile wrote for the other. Flags with no key (mpirun's --bootstrap,
// --srun-mpi ...) are layered over the profile's values by the command
// (mpirunOptionsFrom), as are the flags of commands without a table here
// (envsetup, doctor, exec and run take --profile alone).
var mpirunOverrides = map[string]string{"flavor": "mpi.flavor", "launcher": "mpi.launcher", "mpirun": "mpi.binary"}

var sbatchOverrides = map[string]string{
	"flavor": "mpi.flavor", "launcher": "mpi.launcher", "mpirun": "mpi.binary",
	"partition": "slurm.partition", "account": "slurm.account", "qos": "slurm.qos",
	"time": "slurm.time", "constraint": "slurm.constraint", "requeue": "slurm.requeue",
}

// mpirunDefaults are the settings under the flags: the site profile's
// [mpi] table (and a fixed rendezvous port), when a profile is named by
// --profile or $BATCHKIT_PROFILE. Without either, nothing is assumed: the
// flavor is detected from the launchers on PATH.
func mpirunDefaults(c *cli.Context) (mpirun.Defaults, profile.Env, error) {
	if !c.IsSet("profile") && os.Getenv(envvars.Profile) == "" {
		return mpirun.Defaults{}, profile.Env{}, nil
	}
	// --flavor, --launcher and --mpirun go into the profile as its top
	// layer, so that a different flavor or launcher drops the profile's
	// binary, args and bootstrap written for the other one.
	r, err := loadProfile(c, mpirunOverrides)
	if err != nil {
		return mpirun.Defaults{}, profile.Env{}, err
	}
	return r.Profile.MPIDefaults(), r.Profile.Env, nil
}

// batchProfile is the profile a batch script is written from: as
// resolved, with "$VIRTUAL_ENV" in env.intel_wheels replaced by the venv
// active here (the job runs with the environment it is submitted from,
// which sbatch exports), and with the variables ranks that srun starts
// directly need (withSrunLibs).
func batchProfile(r *profile.Resolved, environ []string) (profile.Profile, error) {
	p := r.Profile
	var err error
	if p.Env.IntelWheels, err = wheelsPrefix(p.Env, environ); err != nil {
		return profile.Profile{}, err
	}
	m := p.MPI
	p.Env.Vars = withSrunLibs(p.Env.Vars, string(m.Flavor), m.Launcher, m.SrunMPI)
	return p, nil
}
