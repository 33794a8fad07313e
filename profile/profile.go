// Package profile reads TOML site profiles: what batchkit needs to know about
// a cluster (Slurm defaults, the MPI flavor and launcher, the environment to
// set up, rendezvous defaults) to write a batch script and start ranks.
//
// Profiles are found by name along a search path (see Loader), may extend
// each other (extends = "NAME"), and are merged in layers: built-in defaults
// < the base profile < the profiles extending it < command-line flags
// (Resolved.Set). Every merged value remembers the file, line and column it
// came from (Resolved.Origin). Decoding is strict: unknown keys, wrong types
// and invalid values are errors naming FILE:LINE:COL, and every problem of a
// file is reported, not just the first.
//
// The schema is documented for site admins in site-configs/README.md.
package profile

import (
	"github.com/batchkit/batchkit/internal/closed"

	"github.com/batchkit/batchkit/mpirun"
)

// Profile is one site profile, or the merged result of several.
type Profile struct {
	// Description is one line shown by 'batchkit profile list'.
	Description string `toml:"description"`
	// Extends names the profile this one is layered on (a name or a path).
	// It is not merged: a Resolved profile's Extends is empty.
	Extends string `toml:"extends"`
	// Templates is a directory whose files override batchkit's templates of
	// the same name. Relative paths are resolved against the profile's
	// directory when the profile is read.
	Templates  string     `toml:"templates"`
	Slurm      Slurm      `toml:"slurm"`
	MPI        MPI        `toml:"mpi"`
	Env        Env        `toml:"env"`
	Rendezvous Rendezvous `toml:"rendezvous"`
}

// Slurm holds scheduler defaults for generated batch scripts.
type Slurm struct {
	Partition  string `toml:"partition"`
	Account    string `toml:"account"`
	QOS        string `toml:"qos"`
	Time       string `toml:"time"` // a Slurm time limit: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]] or UNLIMITED
	Constraint string `toml:"constraint"`
	// Requeue is sbatch --requeue: the batch script requeues the job when
	// the program exits 75 (stopped after a checkpoint), and Slurm may
	// requeue it after a node failure or preemption.
	Requeue bool `toml:"requeue"`
	// ExtraSbatch are further #SBATCH options, one per line, e.g. "--exclusive".
	ExtraSbatch []string `toml:"extra_sbatch"`
	// Modules are loaded with 'module load', in order, before Env.Source.
	Modules []string `toml:"modules"`
}

// MPI says how ranks are started.
type MPI struct {
	Flavor mpirun.Flavor `toml:"flavor"`
	// Launcher is the program that starts the ranks; the key is
	// "launcher" because users call it that.
	Launcher mpirun.Program `toml:"launcher"`
	// Binary is the launcher program, e.g. "mpirun.openmpi" or an absolute
	// path; when not set, the launcher's usual name for the flavor.
	Binary string `toml:"binary"`
	// Args are extra launcher arguments, one argv element each.
	Args []string `toml:"args"`
	// Bootstrap is how the launcher starts its daemons: Hydra's -bootstrap
	// (mpich, intelmpi, mvapich), e.g. slurm or ssh, or Open MPI's plm
	// component (--mca plm), e.g. slurm or rsh. srun takes none.
	Bootstrap string `toml:"bootstrap"`
	// SrunMPI is srun's --mpi plugin when Launcher is srun; the flavor's
	// default when not set (pmix for Open MPI, pmi2 for the others).
	SrunMPI string `toml:"srun_mpi"`
	// AllowRunAsRoot and Oversubscribe are Open MPI's --allow-run-as-root and
	// --oversubscribe; other flavors ignore them.
	AllowRunAsRoot bool `toml:"allow_run_as_root"`
	Oversubscribe  bool `toml:"oversubscribe"`
}

// Env is the environment set up before ranks start: Slurm.Modules are
// loaded, then Source scripts are sourced in order, then Vars are exported.
type Env struct {
	Source []Script `toml:"source"`
	// OneCCLBindings sources the oneCCL bindings for PyTorch's own
	// env/setvars.sh after Source, found through Python (their pip package
	// ships a oneCCL and an Intel MPI of its own, which must match them).
	OneCCLBindings bool `toml:"oneccl_bindings"`
	// Python is the interpreter the job trains with ("" is python3 on
	// PATH): oneccl_bindings finds the bindings with it, doctor checks it.
	Python string `toml:"python"`
	// IntelWheels is the prefix (a venv) where pip installed the Intel MPI
	// and oneCCL wheels, or "$VIRTUAL_ENV" for the user's activated one:
	// after Source, I_MPI_ROOT, CCL_ROOT, FI_PROVIDER_PATH, PATH and
	// LD_LIBRARY_PATH are set from it (envsetup.WheelsChanges), as the
	// vars.sh the wheels lack would.
	IntelWheels string            `toml:"intel_wheels"`
	Vars        map[string]string `toml:"vars"`
}

// Script is a shell script to source, with optional arguments.
type Script struct {
	Script string   `toml:"script"` // an absolute path
	Args   []string `toml:"args"`
}

// Rendezvous holds the defaults for MASTER_PORT.
type Rendezvous struct {
	PortPolicy PortPolicy `toml:"port_policy"`
	// Port is the MASTER_PORT under PortFixed; ignored under PortFromJobID.
	Port int `toml:"port"`
}

// FixedPort is the MASTER_PORT the policy fixes, 0 when it fixes none (the
// port then comes from envsetup.MasterPort's lower layers).
func (r Rendezvous) FixedPort() int {
	if r.PortPolicy == PortFixed && r.Port > 0 {
		return r.Port
	}
	return 0
}

// PortPolicy says how MASTER_PORT is chosen.
type PortPolicy string

const (
	// PortFromJobID derives the port from the job id, so every rank of a job
	// computes the same port and concurrent jobs rarely collide (the default).
	PortFromJobID PortPolicy = "job-id"
	// PortFixed always uses Rendezvous.Port.
	PortFixed PortPolicy = "fixed"
)

// PortPolicies lists every valid policy.
var PortPolicies = []PortPolicy{PortFromJobID, PortFixed}

// ParsePortPolicy validates s.
func ParsePortPolicy(s string) (PortPolicy, error) {
	return closed.Parse("port policy", s, PortPolicies)
}

// UnmarshalText rejects unknown policies.
func (p *PortPolicy) UnmarshalText(b []byte) error {
	return closed.Unmarshal(p, "port policy", b, PortPolicies)
}

// SrunPlugins are the srun --mpi plugins a profile may name.
var SrunPlugins = []string{"pmi2", "pmix", "pmix_v2", "pmix_v3", "pmix_v4", "pmix_v5", "cray_shasta", "none"}

// launcherOptions are the keys of launcher settings only some flavors'
// launchers have (mpirun.Takes says which): other flavors ignore them.
var launcherOptions = map[string]mpirun.LauncherOption{
	"mpi.allow_run_as_root": mpirun.AllowRunAsRoot,
	"mpi.oversubscribe":     mpirun.Oversubscribe,
}
