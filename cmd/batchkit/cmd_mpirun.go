package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/envsetup/envvars"
	"github.com/batchkit/batchkit/internal/closed"
	"github.com/batchkit/batchkit/internal/freeport"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/profile"
	"github.com/batchkit/batchkit/slurm"
	"github.com/batchkit/batchkit/topology"
)

// stringList is a repeatable string flag that, unlike cli.StringSliceFlag,
// never splits a value on commas: --env K=a,b is one variable.
type stringList []string

func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }
func (l *stringList) String() string     { return strings.Join(*l, " ") }

// dryRunHostfile names a generated hostfile in --dry-run output; a real run
// writes a temporary file instead.
const dryRunHostfile = "batchkit.hostfile"

func mpirunCommand() *cli.Command {
	return &cli.Command{
		Name:      "mpirun",
		Usage:     "launch a program on MPI ranks with the torchrun contract set on every rank",
		ArgsUsage: "[--] CMD [ARGS...]",
		Description: `Builds the command line of the MPI launcher of the chosen flavor (Open MPI, MPICH, Intel MPI,
MVAPICH2) or of srun, and runs CMD on every rank as 'batchkit exec -- CMD ARGS...', so each rank
gets RANK, WORLD_SIZE, LOCAL_RANK ... and all ranks agree on MASTER_ADDR (the first host, 127.0.0.1
when all ranks are local) and MASTER_PORT (derived from the Slurm job id inside an allocation, a
free local port outside one; --master-port overrides).

Hosts come from --hosts, --hostfile (Open MPI, Hydra or plain format: converted when the launcher
reads another), or the Slurm allocation (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE). Without
--flavor the flavor is read from --mpirun's name or --version output, else the first of
mpirun.openmpi, mpirun.mpich, mpirun (asked for --version) ... on PATH.

With --profile (or $BATCHKIT_PROFILE) the site profile's [mpi] settings are the defaults under
these flags; a --flavor or --launcher other than the profile's drops its binary, args and bootstrap.
A profile's bootstrap through Slurm (Hydra -bootstrap slurm) applies only inside an allocation.
The profile's [env] source scripts (oneAPI setvars.sh, oneCCL vars.sh) are sourced once, by real
bash, before the launcher is looked up on the PATH they set; the launcher and the ranks run in the
resulting environment (see 'batchkit envsetup'). --dry-run sources nothing: it prints them as
'source' lines before the command. The profile's [env] variables reach every rank like --env
(which wins).

Every rank gets BATCHKIT_JOB_TOKEN (kept if set, else new) via the launcher's environment, never argv (mpirun_rsh: none).

The launcher's exit status is the exit status; SIGINT and SIGTERM are forwarded to it.

Examples:
   batchkit mpirun -n 4 -- python3 train.py --epochs 3
   batchkit mpirun --flavor intelmpi --hosts node1,node2 --ppn 2 -- python3 train.py
   batchkit mpirun --flavor openmpi --hostfile hosts.txt --env NCCL_DEBUG=INFO -- python3 train.py
   batchkit mpirun --launcher srun -n 8 --ppn 4 -- python3 train.py   # inside sbatch
   batchkit mpirun --profile intel-oneccl -n 8 --ppn 4 -- python3 train.py
   batchkit mpirun --dry-run --flavor mpich -n 2 -- python3 train.py`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "np", Aliases: []string{"n"}, Usage: "number of ranks (default: --ppn times the hosts, or the hosts' slots, or the allocation's tasks)"},
			&cli.IntFlag{Name: "ppn", Usage: "ranks per node (wins over per-host slots)"},
			&cli.StringFlag{Name: "hosts", Usage: "comma-separated hosts or Slurm hostlists (node[1-4]), each optionally with :SLOTS for each of its hosts"},
			&cli.StringFlag{Name: "hostfile", Usage: "hostfile: `host slots=N`, `host:N` or `host` lines"},
			&cli.StringFlag{Name: "profile", Usage: "site profile `NAME` or file for the defaults below (default: $BATCHKIT_PROFILE; none: detect the MPI on PATH)"},
			&cli.StringFlag{Name: "flavor", Usage: "MPI flavor: openmpi, mpich, intelmpi or mvapich"},
			&cli.StringFlag{Name: "mpirun", Usage: "launcher binary (`PATH` or name on PATH)"},
			&cli.StringFlag{Name: "launcher", Usage: "mpirun, mpiexec or srun (default mpirun)"},
			&cli.GenericFlag{Name: "env", Value: &stringList{}, Usage: "`K=V` exported to every rank (repeatable; not RANK, WORLD_SIZE ..., which batchkit exec sets per rank)"},
			&cli.GenericFlag{Name: "mpi-arg", Value: &stringList{}, Usage: "`ARG` passed to the launcher as is (repeatable)"},
			&cli.BoolFlag{Name: "allow-run-as-root", Usage: "Open MPI: --allow-run-as-root"},
			&cli.BoolFlag{Name: "oversubscribe", Usage: "Open MPI: --oversubscribe"},
			&cli.StringFlag{Name: "bootstrap", Usage: "Hydra -bootstrap / Open MPI --mca plm / mpirun_rsh -launcher (default slurm for Hydra in an allocation)"},
			&cli.StringFlag{Name: "srun-mpi", Usage: "srun --mpi plugin (default: pmix for Open MPI, pmi2 otherwise)"},
			&cli.IntFlag{Name: "master-port", Usage: "MASTER_PORT for all ranks"},
			&cli.DurationFlag{Name: "source-timeout", Value: envsetup.DefaultTimeout, Usage: "time for the profile's source scripts"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the command, shell-quoted, instead of running it"},
		},
		Action: func(c *cli.Context) error {
			defaults, penv, err := mpirunDefaults(c)
			if err != nil {
				return err
			}
			o, err := mpirunOptionsFrom(c, defaults)
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("finding the batchkit binary: %w", err)
			}
			if !o.dryRun {
				if _, err := sourceOnce(c, penv); err != nil {
					return err
				}
			}
			p, err := planMpirun(o, os.Getenv, systemProbe, self, freePort)
			if err != nil {
				return err
			}
			if o.dryRun {
				return printPlan(c.App.Writer, penv, p)
			}
			if !p.found {
				return cli.Exit(fmt.Sprintf("%s: launcher not found on PATH", p.spec.Binary), 127)
			}
			env, err := envsetup.LauncherEnviron(os.Environ(), p.spec.ForwardEnv, envsetup.NewToken)
			if err != nil {
				return err
			}
			return runPlan(p, env, c.App.Reader, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// lookupIn looks names up in environ: the user's environment as it was
// before sourceOnce changed this process's, so that a variable a script
// set does not pass for one the user exported (which would win over the
// profile's value; envsetup/rank.go's layers 2 to 4).
func lookupIn(environ []string) func(string) (string, bool) {
	m := envsetup.Environ(environ)
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// sourceOnce sources the profile's scripts into this process before the
// launcher is looked up on the PATH they set, and returns their changes;
// the ranks inherit the result through the launcher, so nothing is
// sourced per rank. The profile's variables go by the launcher (-genv),
// not here.
func sourceOnce(c *cli.Context, env profile.Env) (envsetup.Changes, error) {
	if len(env.Source) == 0 && !env.OneCCLBindings {
		return envsetup.Changes{}, nil
	}
	sourced, err := sourceScripts(c.Context, os.Environ(), profileScripts(env.Source), env, c.Duration("source-timeout"))
	if err != nil {
		return envsetup.Changes{}, err
	}
	return sourced, applyToProcess(sourced)
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
	r, err := loadProfile(c, map[string]string{"flavor": "mpi.flavor", "launcher": "mpi.launcher", "mpirun": "mpi.binary"})
	if err != nil {
		return mpirun.Defaults{}, profile.Env{}, err
	}
	m := r.Profile.MPI
	d := mpirun.Defaults{
		Flavor: m.Flavor, Launcher: m.Launcher, Binary: m.Binary, Args: m.Args,
		Bootstrap: m.Bootstrap, SrunMPI: m.SrunMPI, AllowRunAsRoot: m.AllowRunAsRoot, Oversubscribe: m.Oversubscribe,
		Env: r.Profile.Env.Vars, MasterPort: r.Profile.Rendezvous.FixedPort(),
	}
	return d, r.Profile.Env, nil
}

// mpirunOptions are the flags with the defaults layered under them.
type mpirunOptions struct {
	flavor, binary           string
	launcher                 mpirun.Program
	np, ppn, masterPort      int
	npSet, masterPortSet     bool
	hosts, hostfile          string
	env, mpiArgs             []string
	defaultArgs              []string // the profile's launcher arguments, before --mpi-arg
	allowRoot, oversubscribe bool
	bootstrap, srunMPI       string
	bootstrapSet, srunMPISet bool                        // given as flags, not defaults
	profilePort              int                         // the profile's fixed MASTER_PORT; 0: none
	profileEnv               map[string]string           // the profile's variables, under env
	lookup                   func(string) (string, bool) // the user's environment, over profileEnv
	dryRun                   bool
	program                  []string
}

func mpirunOptionsFrom(c *cli.Context, d mpirun.Defaults) (mpirunOptions, error) {
	args := c.Args().Slice()
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return mpirunOptions{}, usagef("mpirun needs a command: batchkit mpirun [flags] -- CMD [ARGS...]")
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
	o := mpirunOptions{
		flavor:        pick("flavor", string(d.Flavor)),
		launcher:      mpirun.Program(pick("launcher", string(d.Launcher))),
		binary:        pick("mpirun", d.Binary),
		np:            c.Int("np"),
		npSet:         c.IsSet("np"),
		ppn:           c.Int("ppn"),
		hosts:         c.String("hosts"),
		hostfile:      c.String("hostfile"),
		env:           *c.Generic("env").(*stringList),
		mpiArgs:       *c.Generic("mpi-arg").(*stringList),
		defaultArgs:   d.Args,
		allowRoot:     pickBool("allow-run-as-root", d.AllowRunAsRoot),
		oversubscribe: pickBool("oversubscribe", d.Oversubscribe),
		bootstrap:     pick("bootstrap", d.Bootstrap),
		bootstrapSet:  c.IsSet("bootstrap"),
		srunMPI:       pick("srun-mpi", d.SrunMPI),
		srunMPISet:    c.IsSet("srun-mpi"),
		masterPort:    c.Int("master-port"),
		masterPortSet: c.IsSet("master-port"),
		profilePort:   d.MasterPort,
		profileEnv:    d.Env,
		lookup:        lookupIn(os.Environ()),
		dryRun:        c.Bool("dry-run"),
		program:       args,
	}
	if c.IsSet("hosts") && c.IsSet("hostfile") {
		return o, usagef("--hosts and --hostfile are exclusive")
	}
	if c.IsSet("hosts") && o.hosts == "" {
		return o, usagef("--hosts is empty")
	}
	if c.IsSet("hostfile") && o.hostfile == "" {
		return o, usagef("--hostfile is empty")
	}
	if o.npSet && o.np < 1 {
		return o, usagef("invalid --np %d: want at least 1", o.np)
	}
	if o.ppn < 0 {
		return o, usagef("invalid --ppn %d: want at least 0", o.ppn)
	}
	if o.masterPortSet && (o.masterPort < 1 || o.masterPort > 65535) {
		return o, usagef("invalid --master-port %d: want 1-65535", o.masterPort)
	}
	return o, nil
}

// mpirunPlan is a launch decided but not started.
type mpirunPlan struct {
	spec      mpirun.Spec
	hostfile  string // generated hostfile text; spec.Hostfile is dryRunHostfile until written
	found     bool   // the launcher binary is on PATH
	masterEnv []string
}

// planMpirun turns options into a launch. Everything it reads from the
// machine is injected: the environment, PATH and --version probes, the
// batchkit binary and the free-port finder.
func planMpirun(o mpirunOptions, getenv topology.Getenv, probe mpirun.Probe, self string, port func() (int, error)) (mpirunPlan, error) {
	var p mpirunPlan
	launcher := o.launcher
	if launcher == "" {
		launcher = mpirun.ProgramMpirun
	}
	if !slices.Contains(mpirun.Programs, launcher) {
		return p, usagef("invalid --launcher %q: want %s", launcher, closed.Join(mpirun.Programs))
	}
	var flavor mpirun.Flavor
	if o.flavor != "" {
		f, err := mpirun.ParseFlavor(o.flavor)
		if err != nil {
			return p, badInput(err)
		}
		flavor = f
	}
	flavor, bin, found, err := mpirun.FindLauncher(probe, flavor, launcher, o.binary)
	if err != nil {
		return p, badInput(err)
	}
	p.found = found

	// Hosts: --hosts, --hostfile, or the Slurm allocation.
	jobID := detect.SlurmJobID(getenv)
	var hosts []mpirun.Host
	var userText string
	switch {
	case o.hosts != "":
		if hosts, err = mpirun.ParseHosts(o.hosts); err != nil {
			return p, usagef("invalid --hosts: %v", err)
		}
	case o.hostfile != "":
		b, err := os.ReadFile(o.hostfile)
		if err != nil {
			return p, badInput(err)
		}
		userText = string(b)
		if hosts, err = mpirun.ParseHostfile(userText); err != nil {
			return p, usagef("%s: %v", o.hostfile, err)
		}
	case jobID != "":
		if hosts, err = allocationHosts(getenv); err != nil {
			return p, badInput(err)
		}
	}

	np := o.np
	if !o.npSet {
		if np = mpirun.DefaultNP(hosts, o.ppn); np == 0 {
			return p, usagef("how many ranks? pass -n N (or --ppn with hosts, or hosts with slots)")
		}
	}

	flags, err := envsetup.SharedEnv(o.env)
	if err != nil {
		return p, badInput(err)
	}
	in := envsetup.LaunchInput{Vars: o.profileEnv, Lookup: o.lookup, Env: flags, Srun: launcher == mpirun.ProgramSrun,
		JobID: jobID, Port: o.masterPort, Fixed: o.profilePort, Free: port}
	for _, h := range hosts {
		in.Hosts = append(in.Hosts, h.Name)
	}
	// Hydra and mpirun_rsh ranks learn only their node's rank count; the
	// node count lets the ranks on a short last node place themselves.
	// (Open MPI exports its own; srun's ranks read the step.)
	if n := mpirun.NodesUsed(hosts, np, o.ppn); n >= 2 && flavor != mpirun.OpenMPI && launcher != mpirun.ProgramSrun {
		in.Nodes = n
	}
	env, err := envsetup.LaunchEnv(in)
	if err != nil {
		return p, err
	}

	// A profile's defaults apply only where they mean something; the same
	// settings given as flags are checked by Command.
	srunMPI, bootstrap := o.srunMPI, o.bootstrap
	if launcher != mpirun.ProgramSrun && !o.srunMPISet {
		srunMPI = ""
	}
	if launcher == mpirun.ProgramSrun && !o.bootstrapSet {
		bootstrap = ""
	}
	// A profile's bootstrap through Slurm is for runs inside an
	// allocation; outside one it would fail to start any daemon.
	if !o.bootstrapSet && jobID == "" && mpirun.BootstrapNeedsAllocation(mpirun.Spec{Flavor: flavor, Launcher: launcher}, bootstrap) {
		bootstrap = ""
	}
	spec := mpirun.Spec{
		Flavor:         flavor,
		Launcher:       launcher,
		Binary:         bin,
		NP:             np,
		PPN:            o.ppn,
		Env:            env,
		ExtraArgs:      append(append([]string(nil), o.defaultArgs...), o.mpiArgs...),
		Bootstrap:      bootstrap,
		SrunMPI:        srunMPI,
		AllowRunAsRoot: o.allowRoot,
		Oversubscribe:  o.oversubscribe,
		InAllocation:   jobID != "",
		Program:        append([]string{self, "exec", "--"}, o.program...),
		Wrapped:        3,
	}
	// The job token goes by name only: its value is in the launcher's
	// environment (launcherEnv), never on the command line. A launcher
	// that cannot do that gets none; its ranks derive one from the job id.
	if mpirun.CanForwardEnv(spec) {
		spec.ForwardEnv = []string{envvars.Token}
	}
	userFile := ""
	if userText != "" {
		userFile = o.hostfile
	}
	place, err := mpirun.PlaceHosts(spec, hosts, userFile, userText)
	if err != nil {
		return p, badInput(err)
	}
	spec.Hosts, spec.Hostfile, spec.HostfileSlots = place.Hosts, place.Hostfile, place.HostfileSlots
	if place.Generated != "" {
		spec.Hostfile = dryRunHostfile
		p.hostfile = place.Generated
	}
	if _, err := mpirun.Command(spec); err != nil {
		return p, badInput(err)
	}
	p.spec = spec
	return p, nil
}

// allocationHosts lists the Slurm job's nodes with their task counts.
func allocationHosts(getenv topology.Getenv) ([]mpirun.Host, error) {
	names, err := detect.SlurmJobHosts(getenv)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	hosts := make([]mpirun.Host, len(names))
	for i, n := range names {
		hosts[i].Name = n
	}
	if tpn := getenv("SLURM_TASKS_PER_NODE"); tpn != "" {
		counts, err := slurm.ParseTasksPerNode(tpn)
		if err != nil {
			return nil, fmt.Errorf("SLURM_TASKS_PER_NODE: %w", err)
		}
		if len(counts) != len(names) {
			return nil, fmt.Errorf("SLURM_TASKS_PER_NODE=%q lists %d nodes but SLURM_JOB_NODELIST has %d", tpn, len(counts), len(names))
		}
		for i, n := range counts {
			hosts[i].Slots = n
		}
	}
	return hosts, nil
}

// printPlan prints the launch as shell text: the profile's source
// scripts first, as `source` lines (a dry run does not source them), then
// the launcher's command line.
func printPlan(w io.Writer, penv profile.Env, p mpirunPlan) error {
	out, err := mpirun.DryRun(p.spec, p.hostfile)
	if err != nil {
		return badInput(err)
	}
	lines, err := sourceLines(penv)
	if err != nil {
		return badInput(err)
	}
	out = lines + out
	_, err = io.WriteString(w, out)
	return err
}

// runPlan runs the launch with env as the launcher's environment.
func runPlan(p mpirunPlan, env []string, stdin io.Reader, stdout, stderr io.Writer) error {
	spec := p.spec
	if p.hostfile != "" {
		f, err := os.CreateTemp("", "batchkit-hostfile-")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		if _, err := f.WriteString(p.hostfile); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		spec.Hostfile = f.Name()
	}
	argv, err := mpirun.Command(spec)
	if err != nil {
		return badInput(err)
	}
	if stdin == nil {
		stdin = os.Stdin
	}
	code, err := mpirun.Run(argv, env, stdin, stdout, stderr)
	var se *mpirun.StartError
	if errors.As(err, &se) {
		return cli.Exit(fmt.Sprintf("%s: %v", argv[0], se.Err), se.Code)
	}
	if err != nil {
		return err
	}
	if code != 0 {
		return &childExit{code}
	}
	return nil
}

// systemProbe looks launchers up on this machine.
var systemProbe = mpirun.Probe{
	LookPath: exec.LookPath,
	Version: func(path string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
		return string(out), err
	},
}

// freePort asks the kernel for a TCP port free on every interface (ranks
// on other nodes connect to it).
func freePort() (int, error) { return freeport.On("") }
