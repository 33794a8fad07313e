// Package sbatch starts ranks through a Slurm batch job: batchkit sbatch.
// NewPlan builds the batch script from a site profile, the user's flags
// and the program (pure: the template set is handed in); Run submits it
// with sbatch, under package launch's rules.
package sbatch

import (
	"cmp"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/profile"
	"github.com/batchkit/batchkit/slurm"
	"github.com/batchkit/batchkit/templates"
)

// Request is what `batchkit sbatch` was asked for.
type Request struct {
	ProfileName string
	Profile     profile.Profile // merged, flags already applied
	Job         slurm.JobOptions
	Program     []string
	// Batchkit is the path of batchkit on the compute nodes; every rank runs
	// `Batchkit exec -- Program` so it sees the torchrun contract.
	Batchkit string
	// Templates renders the script (templates.Load of the profile's
	// template directory, read by the caller); nil: the built-in ones.
	Templates *templates.Set
	// Wait: Run waits for the job and its code is the job's.
	Wait bool
	// SubmitTimeout bounds sbatch without Wait; 0: DefaultSubmitTimeout.
	SubmitTimeout time.Duration
	// Torchrun > 0 runs torchrun (the profile's python -m
	// torch.distributed.run) on every node, one task per node, with this
	// many workers each; Program is then torchrun's arguments.
	Torchrun int
	// FailFast is envvars.FailFast for every rank, set on the launch line:
	// "0" (--no-fail-fast) leaves a failed rank to the launcher, "1"
	// (--fail-fast) has batchkit exec watch under any launcher; "": each
	// rank's batchkit exec decides by its launcher.
	FailFast string
}

// Plan is a batch job decided but not submitted.
type Plan struct {
	Script slurm.Script // what the template was given
	Text   string       // the batch script
	Wait   bool
	// SubmitTimeout bounds sbatch without Wait; 0: DefaultSubmitTimeout.
	SubmitTimeout time.Duration
}

// NewPlan builds and renders the batch script (Script). Its errors are
// launch.ErrInvalid.
func NewPlan(req Request) (Plan, error) {
	script, err := Script(req)
	if err != nil {
		return Plan{}, launch.Bad(err)
	}
	set := req.Templates
	if set == nil {
		if set, err = templates.Load(""); err != nil {
			return Plan{}, err
		}
	}
	text, err := set.Render(templates.Sbatch, script)
	if err != nil {
		return Plan{}, launch.Bad(err)
	}
	return Plan{Script: script, Text: text, Wait: req.Wait, SubmitTimeout: req.SubmitTimeout}, nil
}

// Script builds the batch script's content: #SBATCH directives from
// the profile under the flags, module loads, environment scripts and
// variables, and the launch line for the profile's launcher and flavor.
// With Requeue (the flag or slurm.requeue) the script requeues the job when
// the program exits 75, having checkpointed on SIGUSR1 (never after a
// SIGTERM: a cancel or the time limit), appends every run's output to the
// job's files (--open-mode=append), and tells every rank so
// (BATCHKIT_REQUEUE=1 on the launch line). With Torchrun the one task on
// each node runs torchrun, which starts the program's workers.
func Script(req Request) (slurm.Script, error) {
	if len(req.Program) == 0 || req.Program[0] == "" {
		return slurm.Script{}, fmt.Errorf("no program given: batchkit sbatch [flags] -- CMD [ARGS...]")
	}
	p := req.Profile
	job, program, err := withTorchrun(req.Torchrun, cmp.Or(p.Env.Python, "python3"), req.Job, req.Program)
	if err != nil {
		return slurm.Script{}, err
	}
	job = underFlags(p.JobDefaults(), job)
	directives, err := job.Directives()
	if err != nil {
		return slurm.Script{}, err
	}
	env, err := slurm.CheckEnv(envsetup.BatchEnv(p.Env.Vars, p.Rendezvous.FixedPort()))
	if err != nil {
		return slurm.Script{}, err
	}
	var sources []slurm.Source
	for _, s := range p.Env.Source {
		sources = append(sources, slurm.Source{Path: s.Script, Args: s.Args})
	}
	rankEnv, err := failFastEnv(req.FailFast)
	if err != nil {
		return slurm.Script{}, err
	}
	if job.Requeue {
		// batchkit train warns at start when it has nothing to resume from.
		if rankEnv == nil {
			rankEnv = map[string]string{}
		}
		rankEnv[envvars.Requeue] = "1"
	}
	spec, err := launchSpec(p.MPI, job, rankEnv, append([]string{req.Batchkit, "exec", "--"}, program...))
	if err != nil {
		return slurm.Script{}, err
	}
	launchLine, err := mpirun.Command(spec)
	if err != nil {
		return slurm.Script{}, err
	}
	var bindings *slurm.Bindings
	if p.Env.OneCCLBindings {
		bindings = &slurm.Bindings{Python: cmp.Or(p.Env.Python, "python3"), Probe: envsetup.BindingsProbe}
	}
	return slurm.Script{
		Bindings:   bindings,
		Wheels:     p.Env.IntelWheels,
		Profile:    req.ProfileName,
		Directives: directives,
		Modules:    p.Slurm.Modules,
		Sources:    sources,
		Env:        env,
		Launch:     launchLine,
		Requeue:    job.Requeue,
		ShieldUSR1: mpirun.ShieldUSR1(spec),
	}, nil
}

// underFlags is job (the flags) over def (the profile's
// Profile.JobDefaults): def fills every text option the flags left open. A
// profile's requeue = true cannot be undone here; the CLI's
// --requeue=false does it by setting slurm.requeue (flags beat profiles).
// The site's extra directives come first, so that the user's win.
func underFlags(def, job slurm.JobOptions) slurm.JobOptions {
	jv, dv := reflect.ValueOf(&job).Elem(), reflect.ValueOf(def)
	for i := 0; i < jv.NumField(); i++ {
		if f := jv.Field(i); f.Kind() == reflect.String && f.String() == "" {
			f.SetString(dv.Field(i).String())
		}
	}
	job.Requeue = job.Requeue || def.Requeue
	job.SiteExtra = append(append([]string{}, def.SiteExtra...), job.SiteExtra...)
	return job
}

// failFastEnv is what Request.FailFast sets on every rank. On the launch
// line, not among the script's exports: a value exported at submission
// would win there (batchkit_export), and a flag beats the environment.
func failFastEnv(v string) (map[string]string, error) {
	switch v {
	case "":
		return nil, nil
	case "0", "1":
		return map[string]string{envvars.FailFast: v}, nil
	}
	return nil, fmt.Errorf("%s=%q: want 0 or 1", envvars.FailFast, v)
}

// LaunchLine is the launch line inside a batch script, built by
// mpirun.Command like every other launch line; env reaches every rank by
// the launcher's own means (-genv, -x, srun's environment). srun takes the
// job's shape from the allocation. An mpirun needs the rank count, which
// comes from --ntasks or --nodes × --ntasks-per-node.
func LaunchLine(m profile.MPI, job slurm.JobOptions, env map[string]string, program []string) ([]string, error) {
	spec, err := launchSpec(m, job, env, program)
	if err != nil {
		return nil, err
	}
	return mpirun.Command(spec)
}

// launchSpec is the mpirun.Spec of LaunchLine.
func launchSpec(m profile.MPI, job slurm.JobOptions, env map[string]string, program []string) (mpirun.Spec, error) {
	spec := m.Defaults().Spec()
	spec.Env, spec.InAllocation, spec.Program, spec.PPN = env, true, program, job.NTasksPerNode
	if spec.Launcher == "" {
		spec.Launcher = mpirun.ProgramMpirun
	}
	if spec.Launcher == mpirun.ProgramSrun {
		// Inside the job srun takes counts and nodes from the allocation.
		spec.PPN = 0
		return spec, nil
	}
	np, err := ranks(job)
	if err != nil {
		return mpirun.Spec{}, err
	}
	spec.NP = np
	return spec, nil
}

// ranks is the total rank count an mpirun line must be given.
func ranks(job slurm.JobOptions) (int, error) {
	if job.NTasks > 0 {
		return job.NTasks, nil
	}
	nodes := 1
	if job.Nodes != "" {
		n, err := strconv.Atoi(job.Nodes)
		if err != nil {
			return 0, fmt.Errorf("--nodes %q: an mpirun launch line needs a fixed node count (or give --ntasks)", job.Nodes)
		}
		nodes = n
	}
	per := job.NTasksPerNode
	if per == 0 {
		per = 1
	}
	return nodes * per, nil
}
