package mpirun

// Defaults are launch settings that sit under the command-line flags: a
// site profile's MPI table fills them (profile.Resolved.MPI), and every flag
// the user sets wins over its default. A zero field means "no default".
type Defaults struct {
	Flavor         Flavor
	Launcher       Program
	Binary         string
	Args           []string // passed to the launcher before any --mpi-arg
	Bootstrap      string
	SrunMPI        string
	AllowRunAsRoot bool
	Oversubscribe  bool
	MasterPort     int // a fixed MASTER_PORT (profile port_policy "fixed"); 0: none
	// Env is exported to every rank, under --env (the profile's [env.vars]).
	Env map[string]string
}

// Spec is a launch of d's launcher settings: Env and MasterPort are the
// caller's to layer (under the user's --env, or as a batch script's
// exports), and so are the hosts, counts and program.
func (d Defaults) Spec() Spec {
	return Spec{
		Flavor:         d.Flavor,
		Launcher:       d.Launcher,
		Binary:         d.Binary,
		ExtraArgs:      d.Args,
		Bootstrap:      d.Bootstrap,
		SrunMPI:        d.SrunMPI,
		AllowRunAsRoot: d.AllowRunAsRoot,
		Oversubscribe:  d.Oversubscribe,
	}
}
