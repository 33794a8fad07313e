package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/printable"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/profile"
	"github.com/batchkit/batchkit/topology"
)

// Checks are doctor's checks in the order they are shown.
func Checks() []Check {
	return []Check{
		{"profile", checkProfile},
		{"slurm-commands", checkSlurmCommands},
		{"slurm-controller", checkSlurmController},
		{"mpirun", checkMpirun},
		{"env-scripts", checkScripts},
		{"intel-mpi", checkIntelMPI},
		{"oneccl", checkOneCCL},
		{"libfabric", checkLibfabric},
		{"python", checkPython},
		{"torch", checkTorch},
		{"oneccl-bindings", checkBindings},
		{"ipex", checkIPEX},
		{"topology", checkTopology},
		{"master-port", checkMasterPort},
		{"oversubscription", checkOversubscription},
	}
}

func ok(format string, a ...any) Result {
	return Result{Status: OK, Message: fmt.Sprintf(format, a...)}
}

func skip(format string, a ...any) Result {
	return Result{Status: Skip, Message: fmt.Sprintf(format, a...)}
}

func (r Result) fix(format string, a ...any) Result { r.Fix = fmt.Sprintf(format, a...); return r }

func result(s Status, format string, a ...any) Result {
	return Result{Status: s, Message: fmt.Sprintf(format, a...)}
}

// failIf is FAIL when the profile depends on the thing, WARN otherwise.
func failIf(needed bool) Status {
	if needed {
		return Fail
	}
	return Warn
}

func checkProfile(_ context.Context, env *Env) Result {
	if env.ProfileErr != nil {
		problems := profile.Problems(env.ProfileErr)
		msg := env.ProfileErr.Error()
		if len(problems) > 1 {
			msg = fmt.Sprintf("%v (and %d more problems)", problems[0], len(problems)-1)
		}
		return result(Fail, "%s", strings.ReplaceAll(msg, "\n", "; ")).
			fix("batchkit profile check %s lists every problem; batchkit profile list shows the profiles found", env.ProfileName)
	}
	r := env.Profile
	return ok("%s from %s is valid: %s", r.Name, r.Path, r.Profile.Description)
}

// needsSlurm: the profile starts ranks through Slurm (srun, or Hydra's or
// Open MPI's slurm bootstrap).
func needsSlurm(p *profile.Profile) bool {
	return p != nil && (p.MPI.Launcher == mpirun.ProgramSrun || p.MPI.Bootstrap == "slurm")
}

// needsOneCCL: the profile's collectives are oneCCL's (PyTorch's "ccl"
// backend): it configures CCL_* variables or sources oneCCL's vars.sh.
func needsOneCCL(p *profile.Profile) bool {
	if p == nil {
		return false
	}
	for k := range p.Env.Vars {
		if strings.HasPrefix(k, "CCL_") {
			return true
		}
	}
	for _, s := range p.Env.Source {
		if strings.Contains(s.Script, "/ccl/") || strings.Contains(s.Script, "oneccl") {
			return true
		}
	}
	return false
}

func (env *Env) profile() *profile.Profile {
	if env.Profile == nil {
		return nil
	}
	return &env.Profile.Profile
}

func checkSlurmCommands(_ context.Context, env *Env) Result {
	var missing, found []string
	for _, c := range []string{"sbatch", "srun", "scontrol"} {
		if p, err := env.LookPath(c, env.Getenv("PATH")); err != nil {
			missing = append(missing, c)
		} else {
			found = append(found, p)
		}
	}
	if len(missing) > 0 {
		return result(failIf(needsSlurm(env.profile())), "not on PATH: %s", strings.Join(missing, ", ")).
			fix("install the Slurm client commands or load them (module load slurm); batchkit sbatch and srun launches need them")
	}
	return ok("%s", strings.Join(found, ", "))
}

func checkSlurmController(ctx context.Context, env *Env) Result {
	path, err := env.LookPath("scontrol", env.Getenv("PATH"))
	if err != nil {
		return skip("scontrol is not on PATH")
	}
	out, stderr, err := env.command(ctx, Command{Path: path, Args: []string{"ping"}})
	text := joinLines(out + "\n" + stderr)
	if misbehaved(err) { // scontrol's fault, not slurmctld's
		return result(failIf(needsSlurm(env.profile())), "%v", err).
			fix("run %s ping by hand: Slurm's scontrol prints a line for each controller and exits (type -a scontrol shows which one is first on PATH)", path)
	}
	if err == nil && strings.Contains(text, "UP") && !strings.Contains(text, "DOWN") {
		return ok("%s", printable.Line(text, maxExcerpt))
	}
	msg := printable.Line(text, maxExcerpt)
	if err != nil {
		msg = err.Error()
	}
	return result(failIf(needsSlurm(env.profile())), "slurmctld does not answer: %s", msg).
		fix("check SLURM_CONF and that slurmctld runs (scontrol ping; systemctl status slurmctld on the controller)")
}

// joinLines is a command's output on one line: its lines trimmed (a CR
// of a CRLF too), the empty ones dropped, joined by "; ".
func joinLines(s string) string {
	var lines []string
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "; ")
}

func checkMpirun(ctx context.Context, env *Env) Result {
	p := env.profile()
	if p == nil {
		return skip("needs a valid profile")
	}
	if p.MPI.Launcher == mpirun.ProgramSrun {
		return skip("the profile starts ranks with srun, not mpirun")
	}
	job, err := env.job(ctx)
	if err != nil {
		return skip(needsScripts)
	}
	// FindLauncher may ask a binary for its --version; the answer, or its
	// timeout, is kept so that no launcher is asked twice.
	type answer struct {
		out string
		err error
	}
	versions := map[string]answer{}
	lookPath := func(name string) (string, error) { return env.LookPath(name, job.path) }
	probe := mpirun.Probe{LookPath: lookPath, Version: func(path string) (string, error) {
		if a, ok := versions[path]; ok {
			return a.out, a.err
		}
		out, stderr, err := env.command(ctx, Command{Path: path, Args: []string{"--version"}, Env: job.environ})
		versions[path] = answer{out + stderr, err}
		return out + stderr, err
	}}
	flavor, bin, found, err := mpirun.FindLauncher(probe, p.MPI.Flavor, p.MPI.Launcher, p.MPI.Binary)
	if err != nil {
		return result(Fail, "%v", err).fix("set mpi.binary and mpi.flavor in the profile")
	}
	if !found {
		return result(Fail, "%s (for %s) is not %s", bin, flavor, job.onPath()).
			fix("install %s or load it (source its vars.sh, module load), or set mpi.binary in the profile", flavor)
	}
	path, _ := lookPath(bin)
	out, verErr := probe.Version(path)
	switch {
	case misbehaved(verErr):
		return result(Fail, "%v", verErr).fix("run %s --version by hand: a launcher prints its version and exits", path)
	case verErr != nil && strings.TrimSpace(out) == "":
		return result(Fail, "%v", verErr).fix("run %s --version by hand: the launcher does not answer", path)
	}
	version := firstLine(out)
	got, known := mpirun.FlavorFromVersion(out)
	switch {
	case !known:
		return result(Warn, "%s: cannot tell its MPI flavor from %s", path, printable.Quote(version, maxExcerpt)).
			fix("check that %s is %s's launcher", path, flavor)
	case got != flavor:
		return result(Fail, "%s is %s's launcher (%s), the profile says %s", path, got, printable.Line(version, maxExcerpt), flavor).
			fix("put %s's bin directory first on PATH (source its vars.sh or module load it), or set mpi.binary to its launcher", flavor)
	}
	return ok("%s → %s: %s", bin, path, printable.Line(version, maxExcerpt))
}

func checkScripts(ctx context.Context, env *Env) Result {
	p := env.profile()
	if p == nil {
		return skip("needs a valid profile")
	}
	if !sourcesScripts(p.Env) {
		return skip("the profile sources no scripts")
	}
	var names, lines []string
	for _, s := range p.Env.Source {
		fix := fmt.Sprintf("install it, or change env.source (batchkit profile explain %s shows where it is set)", env.ProfileName)
		f, err := os.Open(s.Script)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return result(Fail, "%s does not exist", s.Script).fix("%s", fix)
			}
			return result(Fail, "%s is not readable: %v", s.Script, err).fix("%s", fix)
		}
		f.Close()
		names = append(names, s.Script)
		lines = append(lines, "source "+strings.TrimSpace(s.Script+" "+strings.Join(s.Args, " ")))
	}
	if p.Env.OneCCLBindings {
		names = append(names, "the oneCCL bindings' env/setvars.sh")
		text, err := envsetup.BindingsShell(p.Env.Python)
		if err != nil {
			return result(Fail, "%v", err)
		}
		lines = append(lines, strings.ReplaceAll(strings.TrimSpace(text), "\n", "; "))
	}
	if p.Env.IntelWheels != "" {
		names = append(names, "the Intel wheels' variables (env.intel_wheels = "+p.Env.IntelWheels+")")
	}
	if _, err := env.job(ctx); err != nil {
		return result(Fail, "%v", err).fix("see what it says: batchkit envsetup --profile %s (or by hand in bash: %s)", env.ProfileName, strings.Join(lines, "; "))
	}
	return ok("bash sources %s", strings.Join(names, ", "))
}

func (env *Env) topology() (topology.Topology, error) {
	return detect.Detect(env.Getenv, detect.Options{Hostname: env.Hostname})
}

func checkTopology(_ context.Context, env *Env) Result {
	t, err := env.topology()
	if err != nil {
		return result(Fail, "%v", err).
			fix("batchkit env shows what detection reads; unset RANK/WORLD_SIZE/... left over from another launch")
	}
	return ok("%s: rank %d of %d, local rank %d of %d, node %d of %d, master %s:%d",
		t.Launcher, t.Rank, t.WorldSize, t.LocalRank, t.LocalWorldSize, t.NodeRank, t.NumNodes, t.MasterAddr, t.MasterPort)
}

func checkMasterPort(_ context.Context, env *Env) Result {
	port, from, err := env.masterPort()
	if err != nil {
		return result(Fail, "%v", err).fix("export MASTER_PORT=N with N in 1..65535")
	}
	if err := env.Listen(port); err != nil {
		status := Warn // a derived port matters only on the master's node
		if from == envvars.MasterPort {
			status = Fail
		}
		return result(status, "port %d (%s) is taken on this node: %v", port, from, err).
			fix("pick a free port: export MASTER_PORT=N (ss -ltnp shows who holds %d)", port)
	}
	return ok("port %d (%s) is free on this node", port, from)
}

// masterPort is the port this rank's launch meets on, by envsetup's
// policy as a job's rank sees it: its MASTER_PORT, else the profile's
// fixed port, else the port detection derives from the Slurm job and step.
// The job and step are asked of detect, which alone reads Slurm's
// variables, and not of a Topology: this check runs where detection may
// fail (a login node, a step's environment without its tasks' variables).
func (env *Env) masterPort() (port int, from string, err error) {
	in := envsetup.PortInput{Given: env.Getenv(envvars.MasterPort),
		JobID: topology.RendezvousID(detect.SlurmJobID(env.Getenv), detect.SlurmStepID(env.Getenv))}
	in.GivenSet = in.Given != "" // as detection reads it
	if p := env.profile(); p != nil {
		in.Fixed = p.Rendezvous.FixedPort()
	}
	p, err := envsetup.MasterPort(in) // no Free: cannot fail
	if err != nil {
		return 0, "", err
	}
	switch p.From {
	case envsetup.PortLater: // what each rank's detection picks outside a job
		return topology.PortForJob(""), "the default, outside a job", nil
	case envsetup.PortFixed:
		from = "the profile's fixed port"
	case envsetup.PortJob:
		from = "derived from job " + in.JobID
	default:
		from = envvars.MasterPort
	}
	n, err := strconv.Atoi(p.Value)
	if err != nil || n < 1 || n > 65535 {
		return 0, "", fmt.Errorf("%s=%q is not a port", envvars.MasterPort, p.Value)
	}
	return n, from, nil
}

func checkOversubscription(_ context.Context, env *Env) Result {
	t, err := env.topology()
	if err != nil {
		return skip("the topology is unknown")
	}
	ranks := max(t.LocalWorldSize, 1)
	threads, from := 1, "OMP_NUM_THREADS unset"
	if v := env.Getenv("OMP_NUM_THREADS"); v != "" {
		n, err := strconv.Atoi(strings.Split(v, ",")[0])
		if err != nil || n < 1 {
			return result(Warn, "OMP_NUM_THREADS=%q is not a thread count", v).fix("export OMP_NUM_THREADS=N")
		}
		threads, from = n, "OMP_NUM_THREADS="+v
	}
	msg := fmt.Sprintf("%d %s on this node × %d %s (%s) on %d usable cores",
		ranks, plural(ranks, "rank"), threads, plural(threads, "thread"), from, env.NumCPU)
	if ranks*threads > env.NumCPU {
		return result(Warn, "%s: oversubscribed", msg).
			fix("export OMP_NUM_THREADS=%d (cores / ranks per node), or start fewer ranks per node", max(env.NumCPU/ranks, 1))
	}
	return ok("%s", msg)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
