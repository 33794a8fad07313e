package envsetup

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/envvars"
)

// LaunchInput is what the variables every rank of one MPI launch shares
// (batchkit mpirun's -genv / -x) depend on, decided once on the launching
// host; each rank's own then come from RankEnv in batchkit exec.
type LaunchInput struct {
	Vars   map[string]string           // the profile's [env] variables
	Lookup func(string) (string, bool) // the user's environment
	Env    map[string]string           // --env (SharedEnv)
	Hosts  []string                    // the hosts in rank order; none: unknown here
	Srun   bool                        // the launcher is srun
	JobID  string                      // the Slurm job id; "" outside an allocation
	Port   int                         // --master-port; 0: none
	Fixed  int                         // the profile's fixed MASTER_PORT; 0: none
	Nodes  int                         // envvars.NumNodes for ranks that need it; 0: not set
	Free   func() (int, error)         // a free port on this host
}

// LaunchEnv is the launch's shared variables: the profile's, the user's
// value over each (layer 2 over 3 of RankEnv's rule), --env over both,
// and the rendezvous:
//
//	MASTER_ADDR  --env's, else the first host (localhost as 127.0.0.1), else
//	             127.0.0.1 (every rank is local) unless srun places the ranks
//	             (outside an allocation its nodes are unknown here: batchkit
//	             exec on each rank derives them from the step)
//	MASTER_PORT  MasterPort's policy: --master-port, else --env's, else the
//	             profile's fixed port, else PortForJob(job id), else a free
//	             port here when MASTER_ADDR is known
//
// The rendezvous is the launch's decision for all ranks: a MASTER_ADDR or
// MASTER_PORT the user merely exported does not override it.
func LaunchEnv(in LaunchInput) (map[string]string, error) {
	env := make(map[string]string, len(in.Vars)+len(in.Env)+3)
	for k, v := range in.Vars {
		if mine, ok := in.Lookup(k); ok {
			v = mine // even empty: the user's beats the site's default
		}
		env[k] = v
	}
	for k, v := range in.Env {
		env[k] = v
	}
	if _, ok := env[envvars.MasterAddr]; !ok {
		switch {
		case len(in.Hosts) > 0 && in.Hosts[0] == "localhost":
			env[envvars.MasterAddr] = "127.0.0.1"
		case len(in.Hosts) > 0:
			env[envvars.MasterAddr] = in.Hosts[0]
		case !in.Srun:
			env[envvars.MasterAddr] = "127.0.0.1"
		}
	}
	given, has := env[envvars.MasterPort]
	policy := PortInput{Flag: in.Port, Given: given, GivenSet: has, Fixed: in.Fixed, JobID: in.JobID}
	if env[envvars.MasterAddr] != "" {
		policy.Free = in.Free // a free port is of use only where the ranks meet
	}
	port, err := MasterPort(policy)
	if err != nil {
		return nil, err
	}
	if port.From != PortLater {
		env[envvars.MasterPort] = port.Value
	}
	if in.Nodes > 0 {
		env[envvars.NumNodes] = strconv.Itoa(in.Nodes)
	}
	return env, nil
}

// BatchEnv is the job-level variables a batch script exports, by name (the
// template prints them sorted, slurm.CheckEnv): the profile's [env]
// variables and, under a fixed port policy, MASTER_PORT (MasterPort with
// nothing else known: the job id comes at submission, and each rank's
// batchkit exec derives the port from it). The user's value over each,
// LaunchEnv's Lookup layer, is the script's to apply when the job runs
// (batchkit_export): the user's environment exists only then.
func BatchEnv(vars map[string]string, fixedPort int) map[string]string {
	env := make(map[string]string, len(vars)+1)
	maps.Copy(env, vars)
	// Without Free the policy cannot fail.
	if port, _ := MasterPort(PortInput{Fixed: fixedPort}); port.From != PortLater {
		env[envvars.MasterPort] = port.Value
	}
	return env
}

// LauncherEnviron is the MPI launcher's own environment: environ without
// an outer launch's envvars.NumNodes (Hydra passes its whole environment
// on, and a stale count misplaces ranks), and with the job token
// (LaunchToken) when the launcher forwards it by name.
func LauncherEnviron(environ []string, forward []string, newToken func() (string, error)) ([]string, error) {
	out := slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == envvars.NumNodes
	})
	if !slices.Contains(forward, envvars.Token) {
		return out, nil
	}
	tok, err := LaunchToken(out, newToken)
	if err != nil {
		return nil, err
	}
	return Merge(out, Changes{Set: map[string]string{envvars.Token: tok}}), nil
}
