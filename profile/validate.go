package profile

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/envsetup/envvars"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/slurm"
)

// issue is one problem with a leaf's value; sub narrows the position to
// part of it, e.g. "[1].script" of env.source.
type issue struct {
	sub, msg string
	atKey    bool // the problem is the key itself (a variable's name)
}

func issuef(sub, format string, a ...any) issue {
	return issue{sub: sub, msg: fmt.Sprintf(format, a...)}
}

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	spaceRE   = regexp.MustCompile(`\s`)
)

// checkLeaf validates the value of one leaf key of p beyond its type.
func checkLeaf(p *Profile, key string) []issue {
	if name, ok := strings.CutPrefix(key, VarsKey+"."); ok {
		if out := checkVar(name); len(out) > 0 {
			return out
		}
		return checkVarValue(p.Env.Vars[name])
	}
	var out []issue
	noSpace := func(s string) {
		switch {
		case s == "":
			out = append(out, issuef("", "empty"))
		case spaceRE.MatchString(s):
			out = append(out, issuef("", "%s contains white space", quoteTOML(s)))
		}
	}
	oneLine := func(sub, s string) {
		switch {
		case s == "":
			out = append(out, issuef(sub, "empty"))
		case strings.ContainsAny(s, "\n\r"):
			out = append(out, issuef(sub, "%s spans lines", quoteTOML(s)))
		}
	}
	switch key {
	case "description":
		if strings.ContainsAny(p.Description, "\n\r") {
			out = append(out, issuef("", "one line, please"))
		}
	case "templates":
		oneLine("", p.Templates)
	case "slurm.partition":
		noSpace(p.Slurm.Partition)
	case "slurm.account":
		noSpace(p.Slurm.Account)
	case "slurm.qos":
		noSpace(p.Slurm.QOS)
	case "slurm.constraint":
		oneLine("", p.Slurm.Constraint)
	case "slurm.time":
		if err := CheckTime(p.Slurm.Time); err != nil {
			out = append(out, issuef("", "%v", err))
		}
	case "slurm.extra_sbatch":
		for i, s := range p.Slurm.ExtraSbatch {
			sub := fmt.Sprintf("[%d]", i)
			switch {
			case strings.HasPrefix(s, "#SBATCH"):
				out = append(out, issuef(sub, "%s: write the option without \"#SBATCH\": %s", quoteTOML(s), quoteTOML(strings.TrimSpace(strings.TrimPrefix(s, "#SBATCH")))))
			case strings.ContainsAny(s, "\n\r"):
				out = append(out, issuef(sub, "%s spans lines: one option per entry", quoteTOML(s)))
			case strings.ContainsRune(s, 0):
				out = append(out, issuef(sub, "%s contains a NUL byte, which an #SBATCH line cannot carry", quoteTOML(s)))
			case !strings.HasPrefix(s, "-"):
				out = append(out, issuef(sub, "%s is not an sbatch option: want e.g. \"--exclusive\"", quoteTOML(s)))
			default:
				// The same parse the batch script's directives go through.
				if _, err := slurm.ParseDirective(s); err != nil {
					out = append(out, issuef(sub, "%v", err))
				}
			}
		}
	case "slurm.modules":
		for i, m := range p.Slurm.Modules {
			sub := fmt.Sprintf("[%d]", i)
			switch {
			case m == "":
				out = append(out, issuef(sub, "empty module name"))
			case spaceRE.MatchString(m):
				out = append(out, issuef(sub, "%s contains white space: one module per entry", quoteTOML(m)))
			}
		}
	case "mpi.flavor":
		if _, err := mpirun.ParseFlavor(string(p.MPI.Flavor)); err != nil {
			out = append(out, issuef("", "%v", err))
		}
	case "mpi.launcher":
		if _, err := ParseLauncher(string(p.MPI.Launcher)); err != nil {
			out = append(out, issuef("", "%v", err))
		}
	case "mpi.binary":
		oneLine("", p.MPI.Binary)
	case "mpi.args":
		for i, a := range p.MPI.Args {
			oneLine(fmt.Sprintf("[%d]", i), a)
		}
	case "mpi.bootstrap":
		if b := p.MPI.Bootstrap; !slices.Contains(HydraBootstraps, b) && !slices.Contains(OpenMPIBootstraps, b) {
			out = append(out, issuef("", "unknown bootstrap %s: want Hydra's %s, or Open MPI's %s", quoteTOML(b),
				strings.Join(HydraBootstraps, ", "), strings.Join(OpenMPIBootstraps, ", ")))
		}
	case "mpi.srun_mpi":
		if !slices.Contains(SrunPlugins, p.MPI.SrunMPI) {
			out = append(out, issuef("", "unknown srun --mpi plugin %s: want one of %s", quoteTOML(p.MPI.SrunMPI), strings.Join(SrunPlugins, ", ")))
		}
	case "env.source":
		for i, s := range p.Env.Source {
			sub := fmt.Sprintf("[%d]", i)
			switch {
			case s.Script == "":
				out = append(out, issuef(sub, "a script to source needs script = \"/path/to/script.sh\""))
			case !filepath.IsAbs(s.Script):
				out = append(out, issuef(sub+".script", "%s: want an absolute path", quoteTOML(s.Script)))
			case strings.ContainsAny(s.Script, "\n\r"):
				out = append(out, issuef(sub+".script", "%s spans lines", quoteTOML(s.Script)))
			case filepath.Base(s.Script) == "setvars.sh" && !slices.Contains(s.Args, "--force"):
				// setvars.sh returns 3 without doing anything when
				// SETVARS_COMPLETED=1, which sbatch brings along from a login
				// shell that sourced oneAPI; under set -e that ends the job.
				out = append(out, issuef(sub+".script", "%s needs args = [\"--force\"]: without it, a job submitted from a shell that already sourced oneAPI (SETVARS_COMPLETED=1) stops at this line", quoteTOML(s.Script)))
			}
			for j, a := range s.Args {
				if strings.ContainsAny(a, "\n\r") {
					out = append(out, issuef(fmt.Sprintf("%s.args[%d]", sub, j), "%s spans lines", quoteTOML(a)))
				}
			}
		}
	case "env.python":
		oneLine("", p.Env.Python)
	case "rendezvous.port_policy":
		if _, err := ParsePortPolicy(string(p.Rendezvous.PortPolicy)); err != nil {
			out = append(out, issuef("", "%v", err))
		}
	case "rendezvous.port":
		if n := p.Rendezvous.Port; n < 1024 || n > 65535 {
			out = append(out, issuef("", "port %d out of range: want 1024-65535", n))
		}
	}
	return out
}

// Variables batchkit itself sets for the ranks.
// BATCHKIT_JOB_TOKEN is a secret (a profile would put it into scripts and
// command lines); BATCHKIT_MPIRUN_NUM_NODES is batchkit mpirun's, per launch.
var reservedVars = append([]string{envvars.Token, envvars.NumNodes}, envvars.Torchrun...)

func checkVar(name string) []issue {
	switch {
	case !envNameRE.MatchString(name):
		return []issue{{msg: fmt.Sprintf("%s is not a valid environment variable name: want letters, digits and _, not starting with a digit", quoteTOML(name)), atKey: true}}
	case name == envvars.MasterPort:
		return []issue{issuef("", "batchkit sets MASTER_PORT: use [rendezvous] port_policy = \"fixed\" and port instead")}
	case slices.Contains(reservedVars, name):
		return []issue{issuef("", "batchkit sets %s for every rank: a profile cannot", name)}
	case slices.Contains(loginVars, name):
		// Every job already has these, and the batch script keeps a value
		// the job has: the profile's would be ignored without a word.
		return []issue{issuef("", "every job already has %s (from the login environment), and a value the job has is kept: change it in an env.source script or a module instead", name)}
	}
	return nil
}

// loginVars are in every job's environment.
var loginVars = []string{"PATH", "LD_LIBRARY_PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD"}

// checkVarValue rejects what no exported variable can hold: a NUL byte.
// A line break is fine: the batch script exports it single-quoted (shquote).
func checkVarValue(v string) []issue {
	if strings.ContainsRune(v, 0) {
		return []issue{issuef("", "%s contains a NUL byte, which no program can receive", quoteTOML(v))}
	}
	return nil
}

// CheckTime validates a Slurm time limit: minutes, MM:SS, HH:MM:SS, D-HH,
// D-HH:MM, D-HH:MM:SS, or UNLIMITED (also INFINITE), as sbatch --time
// accepts them.
func CheckTime(s string) error {
	const forms = "want minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED"
	if strings.EqualFold(s, "UNLIMITED") || strings.EqualFold(s, "INFINITE") {
		return nil
	}
	bad := func(why string) error {
		if why != "" {
			return fmt.Errorf("invalid time %s: %s", quoteTOML(s), why)
		}
		return fmt.Errorf("invalid time %s: %s", quoteTOML(s), forms)
	}
	days, rest, hasDays := strings.Cut(s, "-")
	parts := strings.Split(rest, ":")
	if !hasDays {
		days, parts = "", strings.Split(s, ":")
	}
	num := func(p string) (int, bool) {
		if p == "" || len(p) > 9 || strings.TrimLeft(p, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.Atoi(p)
		return n, err == nil
	}
	if hasDays {
		if _, ok := num(days); !ok {
			return bad("")
		}
	}
	vals := make([]int, len(parts))
	for i, p := range parts {
		n, ok := num(p)
		if !ok {
			return bad("")
		}
		vals[i] = n
	}
	switch {
	case len(parts) > 3:
		return bad("")
	case hasDays:
		// D-HH, D-HH:MM, D-HH:MM:SS
		if vals[0] > 23 {
			return bad("hours must be below 24 after days")
		}
		for _, v := range vals[1:] {
			if v > 59 {
				return bad("minutes and seconds must be below 60")
			}
		}
	case len(parts) == 2:
		// MM:SS
		if vals[1] > 59 {
			return bad("seconds must be below 60")
		}
	case len(parts) == 3:
		// HH:MM:SS
		if vals[1] > 59 || vals[2] > 59 {
			return bad("minutes and seconds must be below 60")
		}
	}
	return nil
}

// checkValues validates every leaf the file sets.
func (d *decoder) checkValues() {
	f := d.f
	for _, key := range f.order {
		for _, is := range checkLeaf(&f.Profile, key) {
			d.problem(posPath(key)+is.sub, is.atKey, "%s%s: %s", key, is.sub, is.msg)
		}
	}
	// Whether the directory exists is not checked here: site template
	// directories often exist only where jobs are submitted, and a profile
	// is also loaded on compute nodes (batchkit mpirun, $BATCHKIT_PROFILE).
	// sbatch names the key's file:line when it cannot read it.
	if f.Has("templates") && len(checkLeaf(&f.Profile, "templates")) == 0 {
		if strings.HasPrefix(f.Path, embeddedPrefix) && !filepath.IsAbs(f.Profile.Templates) {
			d.problem("templates", false, "templates: an embedded profile needs an absolute path")
		}
	}
	if f.Profile.Extends != "" || hasKey(f, extendsKey) {
		if strings.TrimSpace(f.Profile.Extends) == "" {
			d.problem(extendsKey, false, "extends: empty: name a profile or a path")
		}
	}
}

func hasKey(f *File, key string) bool {
	_, ok := f.pos.key[key]
	return ok
}

// posPath is where a leaf key is written: variables may need quoting.
func posPath(key string) string {
	if name, ok := strings.CutPrefix(key, VarsKey+"."); ok {
		return joinPath(VarsKey, name)
	}
	return key
}

// checkFile applies the rules between keys set in the same file. Across
// layers the merged profile follows Resolved.Validate instead: there a user
// switching flavor does not make the site's Open MPI options wrong, they
// are ignored.
func (d *decoder) checkFile() {
	f, p := d.f, &d.f.Profile
	if f.Has("mpi.flavor") {
		flavor := p.MPI.Flavor
		if flavor != mpirun.OpenMPI {
			if f.Has("mpi.allow_run_as_root") && p.MPI.AllowRunAsRoot {
				d.problem("mpi.allow_run_as_root", false, "mpi.allow_run_as_root is an Open MPI option, and this profile's flavor is %s", flavor)
			}
			if f.Has("mpi.oversubscribe") && p.MPI.Oversubscribe {
				d.problem("mpi.oversubscribe", false, "mpi.oversubscribe is an Open MPI option, and this profile's flavor is %s", flavor)
			}
		}
		if f.Has("mpi.bootstrap") {
			if err := bootstrapFor(flavor, p.MPI.Bootstrap); err != nil {
				d.problem("mpi.bootstrap", false, "mpi.bootstrap: %v (flavor %s)", err, flavor)
			}
		}
		if f.Has("mpi.srun_mpi") {
			if err := srunCompatible(flavor, p.MPI.SrunMPI); err != nil {
				d.problem("mpi.srun_mpi", false, "mpi.srun_mpi: %v", err)
			}
		}
	}
	// Both would be written, --no-requeue first, and sbatch takes the last:
	// the file says two things, and one of them is ignored.
	if f.Has("slurm.requeue") && p.Slurm.Requeue && f.Has("slurm.extra_sbatch") {
		for _, s := range p.Slurm.ExtraSbatch {
			if dir, err := slurm.ParseDirective(s); err == nil && dir.Flag == "no-requeue" {
				d.problem("slurm.requeue", false, "slurm.requeue = true, and slurm.extra_sbatch has \"--no-requeue\": choose one")
			}
		}
	}
	if f.Has("mpi.launcher") && p.MPI.Launcher == LauncherSrun && f.Has("mpi.bootstrap") {
		d.problem("mpi.bootstrap", false, "mpi.bootstrap: srun takes no bootstrap; it is for mpirun and mpiexec")
	}
	if f.Has("mpi.launcher") && p.MPI.Launcher != LauncherSrun && f.Has("mpi.srun_mpi") {
		d.problem("mpi.srun_mpi", false, "mpi.srun_mpi: srun's --mpi plugin needs launcher srun, and this profile's launcher is %s", p.MPI.Launcher)
	}
}
