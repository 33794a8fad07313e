package profile

import (
	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/slurm"
)

// What each consumer of a profile gets from it, in one place: a key added
// to Profile reaches its consumer here, and TestEveryKeyReachesAConsumer
// fails until it does (or until the test's allowlist says who reads it
// instead). The layers are the Resolved profile's: built-in defaults, the
// profile files, then the flags Set on top; what a command's flags set
// beyond the profile's keys is layered over these by the command.
//
//   - mpirun's defaults (batchkit mpirun, and the launch line of a batch
//     script): MPI.Defaults, Profile.MPIDefaults;
//   - the batch plan (launch/sbatch): Profile.JobDefaults for its #SBATCH
//     directives, MPI.Defaults for its launch line, Env for its setup;
//   - envsetup (batchkit envsetup, mpirun, exec, run and doctor source the
//     profile's [env]): Env.Scripts and Env.Wheels, then Env.Vars;
//   - doctor reads the Resolved profile itself (package doctor imports
//     profile, so profile cannot build a doctor type).

// Defaults are the launcher settings of the [mpi] table, as mpirun takes
// them (its Spec through Defaults.Spec).
func (m MPI) Defaults() mpirun.Defaults {
	return mpirun.Defaults{
		Flavor:         m.Flavor,
		Launcher:       m.Launcher,
		Binary:         m.Binary,
		Args:           m.Args,
		Bootstrap:      m.Bootstrap,
		SrunMPI:        m.SrunMPI,
		AllowRunAsRoot: m.AllowRunAsRoot,
		Oversubscribe:  m.Oversubscribe,
	}
}

// MPIDefaults are batchkit mpirun's defaults under its flags: the [mpi]
// table, the [env] variables every rank gets, and a fixed MASTER_PORT.
func (p *Profile) MPIDefaults() mpirun.Defaults {
	d := p.MPI.Defaults()
	d.Env = p.Env.Vars
	d.MasterPort = p.Rendezvous.FixedPort()
	return d
}

// JobDefaults are the [slurm] table's values for a batch job's #SBATCH
// directives, under the user's flags (launch/sbatch fills what the flags
// left open from them).
func (p *Profile) JobDefaults() slurm.JobOptions {
	s := p.Slurm
	return slurm.JobOptions{
		Partition:  s.Partition,
		Account:    s.Account,
		QOS:        s.QOS,
		Time:       s.Time,
		Constraint: s.Constraint,
		Requeue:    s.Requeue,
		SiteExtra:  s.ExtraSbatch,
	}
}

// Scripts are the [env] source scripts, as envsetup sources them.
func (e Env) Scripts() []envsetup.Script {
	out := make([]envsetup.Script, len(e.Source))
	for i, s := range e.Source {
		out[i] = envsetup.Script{Path: s.Script, Args: s.Args}
	}
	return out
}

// Wheels is env.intel_wheels' prefix, "$VIRTUAL_ENV" read from environ,
// checked to hold the Intel MPI wheel (envsetup.WheelsPrefix); "" when not
// set.
func (e Env) Wheels(environ []string) (string, error) {
	if e.IntelWheels == "" {
		return "", nil
	}
	return envsetup.WheelsPrefix(e.IntelWheels, envsetup.Environ(environ)["VIRTUAL_ENV"])
}

// Setup is what envsetup sources for the [env] table: its scripts, the
// oneCCL bindings and the Intel wheels (Wheels, read from environ), with
// extra scripts after the profile's.
func (e Env) Setup(environ []string, extra ...envsetup.Script) (envsetup.Setup, error) {
	wheels, err := e.Wheels(environ)
	if err != nil {
		return envsetup.Setup{}, err
	}
	return envsetup.Setup{Scripts: append(e.Scripts(), extra...), OneCCLBindings: e.OneCCLBindings, Python: e.Python, Wheels: wheels}, nil
}
