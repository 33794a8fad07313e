package doctor

import (
	"context"
	"os/exec"
	"strings"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/profile"
)

// A job sources the profile's scripts before it looks mpirun up or starts
// python (envsetup.Runner.SourceEnv; batchkit mpirun's sourceOnce), so the
// launcher and the Python stack are checked in the environment the scripts
// leave, not in doctor's own: a user who has not sourced oneAPI's
// setvars.sh in the login shell is who the intel-oneccl profile is for.

// jobEnv is the environment a job's commands run in.
type jobEnv struct {
	environ []string // nil: this process's own (the profile sources nothing)
	path    string   // its PATH, to look programs up on
	sourced bool     // the profile's scripts made it
}

// needsScripts is a dependent check's SKIP when sourcing failed: without
// the job's environment its verdict would be about another one.
const needsScripts = "needs the environment the profile's scripts leave, and sourcing them failed (see env-scripts)"

// job is the job's environment, computed once: concurrent checks wait for
// the one sourcing, which env.Source bounds by env.Timeout. A profile that
// sources nothing leaves this process's environment as it is.
func (env *Env) job(ctx context.Context) (jobEnv, error) {
	return env.jobs.do(ctx, "", func() (jobEnv, error) {
		p := env.profile()
		if p == nil || !sourcesScripts(p.Env) {
			return jobEnv{path: env.Getenv("PATH")}, nil
		}
		changes, err := env.Source(ctx, env, p.Env)
		if err != nil {
			return jobEnv{}, err
		}
		environ := envsetup.Apply(env.Environ(), changes)
		return jobEnv{environ: environ, path: envsetup.Environ(environ)["PATH"], sourced: true}, nil
	})
}

// sourcesScripts: a job of the profile sources something before it starts
// (env.intel_wheels stands for the vars.sh the wheels lack).
func sourcesScripts(e profile.Env) bool {
	return len(e.Source) > 0 || e.OneCCLBindings || e.IntelWheels != ""
}

// onPath names the PATH a program was looked up on, for messages.
func (j jobEnv) onPath() string {
	if j.sourced {
		return "on the PATH the profile's scripts leave"
	}
	return "on PATH"
}

// lookPath is exec.LookPath on the PATH value given instead of this
// process's, which a library must not set to look a program up. Its error
// is exec.LookPath's.
func lookPath(file, path string) (string, error) {
	if strings.Contains(file, "/") {
		return exec.LookPath(file) // checks that it is an executable, as before
	}
	p, err := envsetup.LookPath(file, path)
	if err != nil {
		return "", &exec.Error{Name: file, Err: exec.ErrNotFound}
	}
	return p, nil
}
