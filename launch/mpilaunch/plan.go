// Package mpilaunch starts ranks through an MPI launcher (mpirun, mpiexec)
// or srun, each rank running `batchkit exec -- PROGRAM` so that it sees the
// torchrun contract: the launch plan of batchkit mpirun. NewPlan decides the
// launch from the options and the machine (all injected) and is pure; Run
// writes the hostfile, starts the launcher and waits, under package
// launch's rules.
//
// The command lines themselves are built by package
// github.com/batchkit/batchkit/mpirun (the flavor rows).
package mpilaunch

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"time"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/closed"
	"github.com/batchkit/batchkit/internal/infile"
	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/slurm"
	"github.com/batchkit/batchkit/topology"
)

// DryRunHostfile names a generated hostfile in a Plan (and so in --dry-run
// output); Run writes a temporary file instead.
const DryRunHostfile = "batchkit.hostfile"

// Options are batchkit mpirun's flags with the profile's defaults layered
// under them.
type Options struct {
	Flavor   string         // "": from the binary's name or --version, or autodetected
	Launcher mpirun.Program // "": mpirun
	Binary   string         // the launcher binary; "": the flavor's usual name
	NP       int            // ranks; with NPSet false, from the hosts
	NPSet    bool
	PPN      int
	Hosts    string // --hosts; exclusive with Hostfile
	Hostfile string // --hostfile
	// Env is --env K=V, every rank's; DefaultArgs (the profile's launcher
	// arguments) go before MPIArgs (--mpi-arg).
	Env, DefaultArgs, MPIArgs     []string
	AllowRunAsRoot, Oversubscribe bool
	Bootstrap, SrunMPI            string
	BootstrapSet, SrunMPISet      bool // given as flags, not profile defaults
	MasterPort                    int  // --master-port; 0: none
	ProfilePort                   int  // the profile's fixed MASTER_PORT; 0: none
	// ProfileEnv is the profile's variables, under Env; Lookup is the
	// user's environment, over ProfileEnv.
	ProfileEnv map[string]string
	Lookup     func(string) (string, bool)
	// FailFast is envvars.FailFast for every rank, over Env's: "0"
	// (--no-fail-fast) leaves a failed rank to the launcher, "1"
	// (--fail-fast) has batchkit exec watch under any launcher; "": each
	// rank's batchkit exec decides by its launcher.
	FailFast string
	// NoHostCheck: do not refuse --hosts/--hostfile names that do not
	// resolve here (checkResolve).
	NoHostCheck bool
	Program     []string // what every rank runs, under batchkit exec
}

// Machine is everything Plan reads from the machine, injected.
type Machine struct {
	Getenv   topology.Getenv
	Probe    mpirun.Probe                 // PATH and --version
	ReadFile func(string) ([]byte, error) // the user's --hostfile (ReadHostfile)
	Self     string                       // the batchkit binary, which every rank runs
	FreePort func() (int, error)
	Resolve  func(host string) error // ResolveHost; nil: no check
	// DryRun: the launch is only printed, maybe for another machine; a
	// launcher of another MPI on this PATH (mpirun.WrongMPIError) is no
	// error then.
	DryRun bool
}

// Plan is a launch decided but not started.
type Plan struct {
	Spec     mpirun.Spec
	Hostfile string // a generated hostfile's text; Spec.Hostfile is then DryRunHostfile
	Found    bool   // the launcher binary is on PATH
}

// NewPlan turns options into a launch. Its errors are launch.ErrInvalid
// (exit 2) unless the machine failed (no free port, say).
func NewPlan(o Options, m Machine) (Plan, error) {
	program, flavor, bin, found, err := findLauncher(o, m.Probe)
	var wrong *mpirun.WrongMPIError
	if errors.As(err, &wrong) && m.DryRun {
		err, found = nil, false
	}
	if err != nil {
		return Plan{}, err
	}
	jobID := detect.SlurmJobID(m.Getenv)
	hosts, userText, err := hostsOf(o, m, jobID)
	if err != nil {
		return Plan{}, err
	}
	np := o.NP
	if !o.NPSet {
		if np = mpirun.DefaultNP(hosts, o.PPN); np == 0 {
			return Plan{}, launch.Invalid("how many ranks? pass -n N (or --ppn with hosts, or hosts with slots)")
		}
	}
	if err := checkRoom(o, hosts, np); err != nil {
		return Plan{}, err
	}
	spec := mpirun.Spec{
		Flavor: flavor, Launcher: program, Binary: bin, NP: np, PPN: o.PPN,
		ExtraArgs:      append(slices.Clone(o.DefaultArgs), o.MPIArgs...),
		AllowRunAsRoot: o.AllowRunAsRoot, Oversubscribe: o.Oversubscribe,
		InAllocation: jobID != "",
		Program:      append([]string{m.Self, "exec", "--"}, o.Program...),
		Wrapped:      3,
	}
	spec.SrunMPI, spec.Bootstrap = startOptions(o, spec)
	if err := checkResolve(o, spec, hosts, m.Resolve); err != nil {
		return Plan{}, err
	}
	if spec.Env, err = sharedEnv(o, m, spec, hosts, jobID); err != nil {
		return Plan{}, err
	}
	// The job token goes by name only: its value is in the launcher's
	// environment (envsetup.LauncherEnviron), never on the command line. A
	// launcher that cannot do that gets none; its ranks derive one from
	// the job id.
	if mpirun.CanForwardEnv(spec) {
		spec.ForwardEnv = []string{envvars.Token}
	}
	p := Plan{Found: found}
	if p.Spec, p.Hostfile, err = place(spec, hosts, o.Hostfile, userText); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// findLauncher checks the launcher and finds its flavor and binary.
func findLauncher(o Options, probe mpirun.Probe) (mpirun.Program, mpirun.Flavor, string, bool, error) {
	program := o.Launcher
	if program == "" {
		program = mpirun.ProgramMpirun
	}
	if !slices.Contains(mpirun.Programs, program) {
		return "", "", "", false, launch.Invalid("invalid --launcher %q: want %s", program, closed.Join(mpirun.Programs))
	}
	var flavor mpirun.Flavor
	if o.Flavor != "" {
		f, err := mpirun.ParseFlavor(o.Flavor)
		if err != nil {
			return "", "", "", false, launch.Bad(err)
		}
		flavor = f
	}
	flavor, bin, found, err := mpirun.FindLauncher(probe, flavor, program, o.Binary)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		err = launch.Bad(err) // a launcher that hangs is not the input's fault
	}
	return program, flavor, bin, found, err
}

// DefaultProbeTimeout bounds a launcher's answer to --version: a working
// one answers at once, but a wrapper script on a slow shared file system
// may take seconds.
const DefaultProbeTimeout = 10 * time.Second

// SystemProbe looks launchers up on this machine's PATH and asks them
// --version, killing one that has not answered within timeout
// (launch.Ask).
func SystemProbe(timeout time.Duration) mpirun.Probe {
	return mpirun.Probe{
		LookPath: exec.LookPath,
		Version:  func(path string) (string, error) { return launch.Ask(timeout, path, "--version") },
	}
}

// hostsOf reads the hosts from --hosts, --hostfile (its text is returned
// too) or the Slurm allocation; none outside one.
func hostsOf(o Options, m Machine, jobID string) ([]mpirun.Host, string, error) {
	switch {
	case o.Hosts != "":
		hosts, err := mpirun.ParseHosts(o.Hosts)
		if err != nil {
			return nil, "", launch.Invalid("invalid --hosts: %v", err)
		}
		return hosts, "", nil
	case o.Hostfile != "":
		b, err := m.ReadFile(o.Hostfile)
		if err != nil {
			return nil, "", launch.Invalid("%v", infile.Named("--hostfile "+o.Hostfile, err))
		}
		hosts, err := mpirun.ParseHostfile(string(b))
		if err != nil {
			return nil, "", launch.Invalid("%s: %v", o.Hostfile, err)
		}
		return hosts, string(b), nil
	case jobID != "":
		hosts, err := allocationHosts(m.Getenv)
		return hosts, "", launch.Bad(err)
	}
	return nil, "", nil
}

// checkRoom refuses more ranks than the user's hosts have room for (--ppn
// per host, else their slots), which launchers other than Open MPI would
// quietly oversubscribe, unless oversubscribing was asked for (the local
// profile does, on purpose). Hosts without slots and no --ppn leave the
// room to the launcher; so does a Slurm allocation, whose task counts are
// not a limit on ranks the way a user's host list is.
func checkRoom(o Options, hosts []mpirun.Host, np int) error {
	where := "--hosts"
	if o.Hosts == "" {
		where = o.Hostfile
	}
	room := mpirun.DefaultNP(hosts, o.PPN)
	switch {
	case o.Oversubscribe || (o.Hosts == "" && o.Hostfile == "") || room == 0 || np <= room:
		return nil
	case o.PPN > 0:
		return launch.Invalid("%d ranks at %d per host need %d hosts, but %s has %d: add hosts, raise --ppn, lower -n or pass --oversubscribe",
			np, o.PPN, (np+o.PPN-1)/o.PPN, where, len(hosts))
	}
	return launch.Invalid("%d ranks need %d slots, but %s has %d: add hosts or slots, lower -n or pass --oversubscribe", np, np, where, room)
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

// startOptions are srun's --mpi plugin and the bootstrap. A profile's
// defaults apply only where they mean something; the same settings given
// as flags are checked by mpirun.Command.
func startOptions(o Options, spec mpirun.Spec) (srunMPI, bootstrap string) {
	srunMPI, bootstrap = o.SrunMPI, o.Bootstrap
	srun := spec.Launcher == mpirun.ProgramSrun
	if !srun && !o.SrunMPISet {
		srunMPI = ""
	}
	if srun && !o.BootstrapSet {
		bootstrap = ""
	}
	// A profile's bootstrap through Slurm is for runs inside an
	// allocation; outside one it would fail to start any daemon.
	if !o.BootstrapSet && !spec.InAllocation && mpirun.BootstrapNeedsAllocation(spec, bootstrap) {
		bootstrap = ""
	}
	return srunMPI, bootstrap
}

// sharedEnv is the variables every rank gets on the launcher's command
// line: the profile's, --env and the rendezvous (envsetup.LaunchEnv).
func sharedEnv(o Options, m Machine, spec mpirun.Spec, hosts []mpirun.Host, jobID string) (map[string]string, error) {
	flags, err := envsetup.SharedEnv(o.Env)
	if err != nil {
		return nil, launch.Bad(err)
	}
	switch o.FailFast {
	case "":
	case "0", "1":
		flags[envvars.FailFast] = o.FailFast
	default:
		return nil, launch.Invalid("%s=%q: want 0 or 1", envvars.FailFast, o.FailFast)
	}
	srun := spec.Launcher == mpirun.ProgramSrun
	in := envsetup.LaunchInput{Vars: o.ProfileEnv, Lookup: o.Lookup, Env: flags, Srun: srun,
		JobID: jobID, Port: o.MasterPort, Fixed: o.ProfilePort, Free: m.FreePort}
	for _, h := range hosts {
		in.Hosts = append(in.Hosts, h.Name)
	}
	// Hydra and mpirun_rsh ranks learn only their node's rank count; the
	// node count lets the ranks on a short last node place themselves.
	// (Open MPI exports its own; srun's ranks read the step.)
	if n := mpirun.NodesUsed(hosts, spec.NP, spec.PPN); n >= 2 && spec.Flavor != mpirun.OpenMPI && !srun {
		in.Nodes = n
	}
	return envsetup.LaunchEnv(in)
}

// place puts the hosts on the command line or in a hostfile the launcher
// reads (its text returned, to be written by Run) and checks the result.
func place(spec mpirun.Spec, hosts []mpirun.Host, hostfile, userText string) (mpirun.Spec, string, error) {
	userFile := ""
	if userText != "" {
		userFile = hostfile
	}
	pl, err := mpirun.PlaceHosts(spec, hosts, userFile, userText)
	if err != nil {
		return spec, "", launch.Bad(err)
	}
	spec.Hosts, spec.Hostfile, spec.HostfileSlots = pl.Hosts, pl.Hostfile, pl.HostfileSlots
	if pl.Generated != "" {
		spec.Hostfile = DryRunHostfile
	}
	if _, err := mpirun.Command(spec); err != nil {
		return spec, "", launch.Bad(err)
	}
	return spec, pl.Generated, nil
}

// MaxHostfile bounds a --hostfile: a line per host of the largest
// machines is a few megabytes.
const MaxHostfile = 16 << 20

// ReadHostfile is Machine.ReadFile on a real machine: a regular file of at
// most MaxHostfile bytes, so that a FIFO cannot block the open and
// /dev/zero cannot fill memory.
func ReadHostfile(path string) ([]byte, error) { return infile.Read(path, MaxHostfile) }
