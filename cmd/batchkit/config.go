package main

// The configuration of every command that takes more than a few flags,
// resolved here, in one place, in the order built-in defaults -> profile
// -> flags, as go-ethereum's makeConfigNode builds a node's. For the
// commands that read a site profile, loadProfile resolves it (its built-in
// defaults and files) and puts the overriding flags on top; the profile's
// methods in profile/consumers.go build each consumer's input from the
// result (mpirun's defaults, the batch plan's, envsetup's; doctor reads the
// resolved profile); the command's own flags go over those
// (mpirunOptionsFrom, sbatchRequest). train and bench read no profile:
// their defaults are the libraries' (job.Defaults, bench.Defaults), which
// their flags declare, and trainConfig and benchConfig read the flags.

import (
	"fmt"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/flagvalues"
	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/launch/mpilaunch"
	"github.com/batchkit/batchkit/launch/sbatch"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/profile"
	"github.com/batchkit/batchkit/slurm"
	"github.com/batchkit/batchkit/templates"
	"github.com/batchkit/batchkit/trainer/bench"
	"github.com/batchkit/batchkit/trainer/job"
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

// profileNames are the profiles --profile can name, what TAB offers
// after it (a file too: when no name fits, the shell completes file names).
func profileNames() []string {
	names, _ := profile.NewLoader(os.Getenv).Names()
	return names
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
// directly need (launch.WithSrunLibs).
func batchProfile(r *profile.Resolved, environ []string) (profile.Profile, error) {
	p := r.Profile
	var err error
	if p.Env.IntelWheels, err = p.Env.Wheels(environ); err != nil {
		return profile.Profile{}, badInput(err)
	}
	m := p.MPI
	p.Env.Vars = launch.WithSrunLibs(p.Env.Vars, string(m.Flavor), m.Launcher, m.SrunMPI)
	return p, nil
}

// mpirunOptionsFrom layers the flags over the defaults and checks what
// is wrong with the flags alone.
func mpirunOptionsFrom(c *cli.Context, d mpirun.Defaults) (mpilaunch.Options, error) {
	args, err := programArgs(c, "mpirun")
	if err != nil {
		return mpilaunch.Options{}, err
	}
	pick := func(name, def string) string {
		if c.IsSet(name) {
			return c.String(name)
		}
		return def
	}
	pickBool := func(name string, def bool) bool {
		if c.IsSet(name) {
			return c.Bool(name)
		}
		return def
	}
	o := mpilaunch.Options{
		Flavor:         pick("flavor", string(d.Flavor)),
		Launcher:       mpirun.Program(pick("launcher", string(d.Launcher))),
		Binary:         pick("mpirun", d.Binary),
		NP:             c.Int("np"),
		NPSet:          c.IsSet("np"),
		PPN:            c.Int("ppn"),
		Hosts:          c.String("hosts"),
		Hostfile:       c.String("hostfile"),
		Env:            *c.Generic("env").(*stringList),
		MPIArgs:        *c.Generic("mpi-arg").(*stringList),
		DefaultArgs:    d.Args,
		AllowRunAsRoot: pickBool("allow-run-as-root", d.AllowRunAsRoot),
		Oversubscribe:  pickBool("oversubscribe", d.Oversubscribe),
		NoHostCheck:    c.Bool("no-host-check"),
		Bootstrap:      pick("bootstrap", d.Bootstrap),
		BootstrapSet:   c.IsSet("bootstrap"),
		SrunMPI:        pick("srun-mpi", d.SrunMPI),
		SrunMPISet:     c.IsSet("srun-mpi"),
		MasterPort:     c.Int("master-port"),
		ProfilePort:    d.MasterPort,
		ProfileEnv:     d.Env,
		Lookup:         lookupIn(os.Environ()),
		Program:        args,
	}
	if o.FailFast, err = failFastFrom(c, o.Env); err != nil {
		return o, err
	}
	switch {
	case c.IsSet("hosts") && c.IsSet("hostfile"):
		return o, usagef("--hosts and --hostfile are exclusive")
	case c.IsSet("hosts") && o.Hosts == "":
		return o, usagef("--hosts is empty")
	case c.IsSet("hostfile") && o.Hostfile == "":
		return o, usagef("--hostfile is empty")
	case o.NPSet && o.NP < 1:
		return o, usagef("invalid --np %d: want at least 1", o.NP)
	case o.PPN < 0:
		return o, usagef("invalid --ppn %d: want at least 0", o.PPN)
	case c.IsSet("master-port") && (o.MasterPort < 1 || o.MasterPort > 65535):
		return o, usagef("invalid --master-port %d: want 1-65535", o.MasterPort)
	}
	return o, nil
}

// sbatchRequest is the profile under the flags, the batchkit binary the
// ranks run and the templates that render the script.
func sbatchRequest(c *cli.Context, program []string) (sbatch.Request, error) {
	r, err := loadProfile(c, sbatchOverrides)
	if err != nil {
		return sbatch.Request{}, err
	}
	failFast, err := failFastFrom(c, nil)
	if err != nil {
		return sbatch.Request{}, err
	}
	if n := c.Int("torchrun"); c.IsSet("torchrun") && n < 1 { // 0 would silently mean no torchrun
		return sbatch.Request{}, usagef("--torchrun %d: want the number of workers on each node, at least 1", n)
	}
	self := c.String("batchkit")
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return sbatch.Request{}, fmt.Errorf("finding batchkit's own path (give --batchkit): %w", err)
		}
	}
	set, err := templates.Load(r.Profile.Templates)
	if err != nil {
		if o, ok := r.Origin("templates"); ok {
			err = fmt.Errorf("%s: templates: %w", o, err)
		}
		return sbatch.Request{}, badInput(err)
	}
	job := slurm.JobOptions{
		JobName: c.String("job-name"), Nodes: c.String("nodes"), NTasks: c.Int("ntasks"),
		NTasksPerNode: c.Int("ntasks-per-node"), CPUsPerTask: c.Int("cpus-per-task"), GPUs: c.String("gpus"),
		Output: c.String("output"), Error: c.String("error"), Array: c.String("array"),
		Exclusive: c.Bool("exclusive"), Signal: c.String("signal"), Dependency: c.String("dependency"),
		Mem: c.String("mem"), MemPerCPU: c.String("mem-per-cpu"), Gres: c.String("gres"),
		GPUsPerNode: c.String("gpus-per-node"), GPUsPerTask: c.String("gpus-per-task"),
		Nodelist: c.String("nodelist"), Exclude: c.String("exclude"), Reservation: c.String("reservation"),
		Chdir: c.String("chdir"), MailType: c.String("mail-type"), MailUser: c.String("mail-user"),
		Requeue: r.Profile.Slurm.Requeue, Extra: []string(*c.Generic("sbatch-arg").(*stringList)),
	}
	p, err := batchProfile(r, os.Environ())
	if err != nil {
		return sbatch.Request{}, err
	}
	return sbatch.Request{ProfileName: r.Name, Profile: p, Job: job, Program: program, Batchkit: self,
		Templates: set, Wait: c.Bool("wait"), SubmitTimeout: c.Duration("submit-timeout"), Torchrun: c.Int("torchrun"), FailFast: failFast}, nil
}

// trainConfig is the flags' values; their defaults are job.Defaults.
func trainConfig(c *cli.Context) job.Config {
	return job.Config{Epochs: c.Int("epochs"), BatchSize: c.Int("batch-size"),
		LR: c.Float64("lr"), Momentum: c.Float64("momentum"), WeightDecay: c.Float64("weight-decay"),
		Seed: c.Uint64("seed"), Hidden: c.String("hidden"), Data: c.String("data"), Backend: c.String("backend"),
		CheckpointDir: c.String("checkpoint-dir"), CheckpointEvery: c.Int("checkpoint-every"), CheckEvery: c.Int("check-every"),
		Metrics: c.String("metrics"), Plot: c.String("plot"), Force: c.Bool("force"), Format: c.String("format")}
}

// benchConfig is the run's flags: the defaults are the flags' own.
func benchConfig(c *cli.Context) bench.Config {
	return bench.Config{Op: c.String("op"), Backend: c.String("backend"), DType: c.String("dtype"),
		MinBytes: c.String("min-bytes"), MaxBytes: c.String("max-bytes"),
		Iters: c.Int("iters"), ItersSet: c.IsSet("iters"), Label: c.String("label"),
		Timeout: c.Duration("timeout"), RendezvousTimeout: c.Duration("rendezvous-timeout")}
}
