package slurm

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Directive is one #SBATCH line: --Flag=Value, or --Flag alone when Value
// is empty.
type Directive struct {
	Flag  string
	Value string
}

// Source is an environment script the batch script sources before launching.
type Source struct {
	Path string
	Args []string
}

// EnvVar is an exported variable.
type EnvVar struct {
	Name, Value string
}

// Script is everything the sbatch template needs. It is plain data: the
// template decides the layout, this package decides the content.
type Script struct {
	Profile    string
	Directives []Directive
	Modules    []string
	Sources    []Source
	Env        []EnvVar
	Launch     []string // argv of the launch line
	// Requeue: the script requeues the job when the launch line exits 75
	// (the program stopped on SIGUSR1 after a checkpoint), never after a
	// SIGTERM of its own (a cancel or the time limit).
	Requeue bool
	// Bindings, when set, sources the oneCCL bindings' env/setvars.sh
	// after Sources, found by running Python with Probe (which prints the
	// package's directory).
	Bindings *Bindings
	// Wheels, when set, is the Intel MPI and oneCCL wheels' prefix (a
	// profile's env.intel_wheels, resolved): the script exports what
	// envsetup.WheelsChanges sets, after the scripts.
	Wheels string
	// ShieldUSR1: the launch line is Intel MPI's Hydra starting its proxies
	// through srun (mpirun.ShieldUSR1): the script starts it, and srun the
	// proxies, with SIGUSR1 ignored, so that a preemption signal reaches
	// the ranks without killing them.
	ShieldUSR1 bool
}

// Bindings is how the batch script finds the oneCCL bindings for PyTorch.
type Bindings struct{ Python, Probe string }

// JobOptions are the sbatch options batchkit understands by name. Zero
// values are left out, so a profile default or Slurm's own applies.
type JobOptions struct {
	JobName       string
	Nodes         string // "2" or "2-4"
	NTasks        int
	NTasksPerNode int
	CPUsPerTask   int
	GPUs          string
	Time          string
	Partition     string
	Account       string
	QOS           string
	Constraint    string
	Mem           string // --mem: per node
	MemPerCPU     string
	Gres          string
	GPUsPerNode   string
	GPUsPerTask   string
	Nodelist      string
	Exclude       string
	Reservation   string
	Output, Error string
	Array         string
	Exclusive     bool
	Signal        string
	Dependency    string
	Chdir         string
	MailType      string
	MailUser      string
	Requeue       bool
	// SiteExtra (a profile's extra_sbatch) come before the named options,
	// Extra (--sbatch-arg) after them: sbatch takes the last of repeated
	// directives, and the user's flags beat the site's defaults.
	SiteExtra []string // raw "--flag=value" or "--flag"
	Extra     []string
}

var (
	flagName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*$`)
	envName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Directives turns options into #SBATCH directives, in a fixed order.
func (o JobOptions) Directives() ([]Directive, error) {
	var ds []Directive
	for _, n := range []struct {
		name string
		v    int
	}{{"--ntasks", o.NTasks}, {"--ntasks-per-node", o.NTasksPerNode}, {"--cpus-per-task", o.CPUsPerTask}} {
		if n.v < 0 {
			return nil, fmt.Errorf("%s %d: must not be negative", n.name, n.v)
		}
	}
	if o.Nodes != "" && !validNodes(o.Nodes) {
		return nil, fmt.Errorf("--nodes %q: want a number of nodes N or a range MIN-MAX, at least 1", o.Nodes)
	}
	extra := func(where string, raws []string) error {
		for _, raw := range raws {
			if err := CheckManaged(raw); err != nil {
				return fmt.Errorf("%s %w", where, err)
			}
			d, err := ParseDirective(raw)
			if err != nil {
				return err
			}
			ds = append(ds, d)
		}
		return nil
	}
	if err := extra("slurm.extra_sbatch", o.SiteExtra); err != nil {
		return nil, err
	}
	num := func(n int) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprint(n)
	}
	for _, d := range []Directive{
		{"job-name", o.JobName}, {"nodes", o.Nodes}, {"ntasks", num(o.NTasks)},
		{"ntasks-per-node", num(o.NTasksPerNode)}, {"cpus-per-task", num(o.CPUsPerTask)}, {"gpus", o.GPUs},
		{"time", o.Time}, {"partition", o.Partition}, {"account", o.Account}, {"qos", o.QOS},
		{"constraint", o.Constraint}, {"mem", o.Mem}, {"mem-per-cpu", o.MemPerCPU}, {"gres", o.Gres},
		{"gpus-per-node", o.GPUsPerNode}, {"gpus-per-task", o.GPUsPerTask}, {"nodelist", o.Nodelist},
		{"exclude", o.Exclude}, {"reservation", o.Reservation},
		{"output", o.Output}, {"error", o.Error}, {"array", o.Array},
	} {
		if d.Value != "" {
			ds = append(ds, d)
		}
	}
	if o.Exclusive {
		ds = append(ds, Directive{Flag: "exclusive"})
	}
	for _, d := range []Directive{
		{"signal", o.Signal}, {"dependency", o.Dependency}, {"chdir", o.Chdir}, {"mail-type", o.MailType}, {"mail-user", o.MailUser},
	} {
		if d.Value != "" {
			ds = append(ds, d)
		}
	}
	if o.Requeue {
		// Every run of a requeued job writes the same output files; Slurm
		// truncates them at each start unless told to append (its default,
		// JobFileAppend=0), and only the last run's output would be left.
		// An --sbatch-arg=--open-mode=truncate, after this, still wins.
		ds = append(ds, Directive{Flag: "requeue"}, Directive{Flag: "open-mode", Value: "append"})
	}
	if err := extra("--sbatch-arg", o.Extra); err != nil {
		return nil, err
	}
	// An #SBATCH line ends at a line break: say which option held one here,
	// not in the template's words at render time.
	for _, d := range ds {
		if strings.ContainsAny(d.Value, "\n\r\x00") {
			return nil, fmt.Errorf("--%s %q: contains a line break or NUL, which an #SBATCH line cannot carry", d.Flag, d.Value)
		}
	}
	return ds, nil
}

// validNodes: "N" or "MIN-MAX" with 1 <= MIN <= MAX, as sbatch --nodes.
func validNodes(s string) bool {
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		hi = lo
	}
	a, err1 := strconv.Atoi(lo)
	b, err2 := strconv.Atoi(hi)
	return err1 == nil && err2 == nil && a >= 1 && b >= a && lo[0] != '+' && hi[0] != '+'
}

// ParseDirective parses "--flag=value", "--flag value" or "--flag" as given
// to --sbatch-arg or in a profile's extra directives.
func ParseDirective(raw string) (Directive, error) {
	s := strings.TrimSpace(raw)
	s = strings.TrimPrefix(s, "#SBATCH")
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "--") {
		return Directive{}, fmt.Errorf("sbatch directive %q: want the long form --flag=value", raw)
	}
	s = s[2:]
	// The name ends at the first '=' or blank: "--comment key=val" is
	// comment = "key=val".
	flag, value := s, ""
	if i := strings.IndexAny(s, "= \t"); i >= 0 {
		flag, value = s[:i], strings.TrimSpace(s[i+1:])
	}
	if !flagName.MatchString(flag) {
		return Directive{}, fmt.Errorf("sbatch directive %q: %q is not an option name", raw, flag)
	}
	return Directive{Flag: flag, Value: value}, nil
}

// CheckEnv validates variable names and returns the variables sorted by name.
func CheckEnv(vars map[string]string) ([]EnvVar, error) {
	out := make([]EnvVar, 0, len(vars))
	for k, v := range vars {
		if !envName.MatchString(k) {
			return nil, fmt.Errorf("environment variable name %q is not a valid identifier", k)
		}
		out = append(out, EnvVar{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
