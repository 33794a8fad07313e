package profile

import (
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/slurm"
)

// issue is one problem with a value, at where it is: the leaf's path, or a
// part of it, e.g. env.source[1].script.
type issue struct {
	at    keyPath
	msg   string
	atKey bool // the problem is the key itself (a variable's name)
}

func issuef(at keyPath, format string, a ...any) issue {
	return issue{at: at, msg: fmt.Sprintf(format, a...)}
}

// String is the issue as an error message names it: "PATH: message".
func (is issue) String() string { return is.at.String() + ": " + is.msg }

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	spaceRE   = regexp.MustCompile(`\s`)
)

// checkLeaf validates the value of one leaf key of p beyond its type, with
// the check its row in checks names.
func checkLeaf(p *Profile, key string) []issue {
	l, at, ok := leafAt(key)
	if !ok || l.check == nil {
		return nil
	}
	v := reflect.ValueOf(p).Elem().FieldByIndex(l.index)
	if v.Kind() == reflect.Map { // a variable: its value, "" when unset
		if v = v.MapIndex(reflect.ValueOf(at.last())); !v.IsValid() {
			v = reflect.Zero(l.typ.Elem())
		}
	}
	return l.check(v, at)
}

// Adapters from checks of one Go value to the check of a schema row.

// value checks a value of type T.
func value[T any](c func(v T, at keyPath) []issue) check {
	return func(v reflect.Value, at keyPath) []issue { return c(v.Interface().(T), at) }
}

// each checks every element of a list, at its index.
func each[T any](c func(v T, at keyPath) []issue) check {
	return func(v reflect.Value, at keyPath) []issue {
		var out []issue
		for i := 0; i < v.Len(); i++ {
			out = append(out, c(v.Index(i).Interface().(T), at.Index(i))...)
		}
		return out
	}
}

// valid checks text (of any string type) with a function that says why it
// is not valid.
func valid(c func(s string) error) check {
	return func(v reflect.Value, at keyPath) []issue {
		if err := c(v.String()); err != nil {
			return []issue{issuef(at, "%v", err)}
		}
		return nil
	}
}

// parsed checks text with the parser of its type: a closed set of words.
func parsed[T any](parse func(s string) (T, error)) check {
	return valid(func(s string) error { _, err := parse(s); return err })
}

// Checks of text, shared by the sections.

// singleLine is text that may be empty but not span lines.
func singleLine(s string, at keyPath) []issue {
	if strings.ContainsAny(s, "\n\r") {
		return []issue{issuef(at, "one line, please")}
	}
	return nil
}

// nonEmptyLine is a path, a program or an argument: not empty, one line.
func nonEmptyLine(s string, at keyPath) []issue {
	switch {
	case s == "":
		return []issue{issuef(at, "empty")}
	case strings.ContainsAny(s, "\n\r"):
		return []issue{issuef(at, "%s spans lines", quoteTOML(s))}
	}
	return nil
}

// noSpace is a Slurm name: a partition, an account, a QOS.
func noSpace(s string, at keyPath) []issue {
	switch {
	case s == "":
		return []issue{issuef(at, "empty")}
	case spaceRE.MatchString(s):
		return []issue{issuef(at, "%s contains white space", quoteTOML(s))}
	}
	return nil
}

// [slurm]

// sbatchOption is one entry of slurm.extra_sbatch.
func sbatchOption(s string, at keyPath) []issue {
	switch {
	case strings.HasPrefix(s, "#SBATCH"):
		return []issue{issuef(at, "%s: write the option without \"#SBATCH\": %s", quoteTOML(s), quoteTOML(strings.TrimSpace(strings.TrimPrefix(s, "#SBATCH"))))}
	case strings.ContainsAny(s, "\n\r"):
		return []issue{issuef(at, "%s spans lines: one option per entry", quoteTOML(s))}
	case strings.ContainsRune(s, 0):
		return []issue{issuef(at, "%s contains a NUL byte, which an #SBATCH line cannot carry", quoteTOML(s))}
	case !strings.HasPrefix(s, "-"):
		return []issue{issuef(at, "%s is not an sbatch option: want e.g. \"--exclusive\"", quoteTOML(s))}
	}
	// The same checks the batch script's directives go through: first
	// what batchkit sbatch writes itself (in any spelling), then the form.
	if err := slurm.CheckManaged(s); err != nil {
		return []issue{issuef(at, "%v", err)}
	}
	if _, err := slurm.ParseDirective(s); err != nil {
		return []issue{issuef(at, "%v", err)}
	}
	return nil
}

// moduleName is one entry of slurm.modules.
func moduleName(m string, at keyPath) []issue {
	switch {
	case m == "":
		return []issue{issuef(at, "empty module name")}
	case spaceRE.MatchString(m):
		return []issue{issuef(at, "%s contains white space: one module per entry", quoteTOML(m))}
	}
	return nil
}

// [mpi]

// anyBootstrap is a bootstrap of some flavor's launcher; checkFile and
// Resolved.Validate match it to the flavor.
func anyBootstrap(b string, at keyPath) []issue {
	if err := mpirun.CheckAnyBootstrap(b, quoteTOML); err != nil {
		return []issue{issuef(at, "%s", err)}
	}
	return nil
}

func srunPlugin(p string, at keyPath) []issue {
	if !slices.Contains(SrunPlugins, p) {
		return []issue{issuef(at, "unknown srun --mpi plugin %s: want one of %s", quoteTOML(p), strings.Join(SrunPlugins, ", "))}
	}
	return nil
}

// [env]

// sourceScript is one entry of env.source.
func sourceScript(s Script, at keyPath) []issue {
	var out []issue
	script := at.Child("script")
	switch {
	case s.Script == "":
		out = append(out, issuef(at, "a script to source needs script = \"/path/to/script.sh\""))
	case !filepath.IsAbs(s.Script):
		out = append(out, issuef(script, "%s: want an absolute path", quoteTOML(s.Script)))
	case strings.ContainsAny(s.Script, "\n\r"):
		out = append(out, issuef(script, "%s spans lines", quoteTOML(s.Script)))
	case filepath.Base(s.Script) == "setvars.sh" && !slices.Contains(s.Args, "--force"):
		// setvars.sh returns 3 without doing anything when
		// SETVARS_COMPLETED=1, which sbatch brings along from a login
		// shell that sourced oneAPI; under set -e that ends the job.
		out = append(out, issuef(script, "%s needs args = [\"--force\"]: without it, a job submitted from a shell that already sourced oneAPI (SETVARS_COMPLETED=1) stops at this line", quoteTOML(s.Script)))
	}
	for j, a := range s.Args {
		if strings.ContainsAny(a, "\n\r") {
			out = append(out, issuef(at.Child("args").Index(j), "%s spans lines", quoteTOML(a)))
		}
	}
	return out
}

// wheelsPrefix is env.intel_wheels: an absolute path, or "$VIRTUAL_ENV"
// (envsetup.WheelsActive), the venv active when batchkit runs.
func wheelsPrefix(s string, at keyPath) []issue {
	switch {
	case s == envsetup.WheelsActive:
	case !filepath.IsAbs(s):
		return []issue{issuef(at, "%s: want an absolute path, or %q for the virtual environment active when batchkit runs", quoteTOML(s), envsetup.WheelsActive)}
	case strings.ContainsAny(s, "\n\r"):
		return []issue{issuef(at, "%s spans lines", quoteTOML(s))}
	}
	return nil
}

// variable is one entry of env.vars: at names it.
func variable(v string, at keyPath) []issue {
	if out := checkVar(at); len(out) > 0 {
		return out
	}
	return checkVarValue(v, at)
}

// Variables batchkit itself sets for the ranks.
// BATCHKIT_JOB_TOKEN is a secret (a profile would put it into scripts and
// command lines); BATCHKIT_MPIRUN_NUM_NODES is batchkit mpirun's, per launch.
var reservedVars = append([]string{envvars.Token, envvars.NumNodes}, envvars.Torchrun...)

// checkVar checks the name of the variable at.
func checkVar(at keyPath) []issue {
	switch name := at.last(); {
	case !envNameRE.MatchString(name):
		return []issue{{at: at, msg: fmt.Sprintf("%s is not a valid environment variable name: want letters, digits and _, not starting with a digit", quoteTOML(name)), atKey: true}}
	case name == envvars.MasterPort:
		return []issue{issuef(at, "batchkit sets MASTER_PORT: use [rendezvous] port_policy = \"fixed\" and port instead")}
	case slices.Contains(reservedVars, name):
		return []issue{issuef(at, "batchkit sets %s for every rank: a profile cannot", name)}
	case slices.Contains(loginVars, name):
		// Every job already has these, and the batch script keeps a value
		// the job has: the profile's would be ignored without a word.
		return []issue{issuef(at, "every job already has %s (from the login environment), and a value the job has is kept: change it in an env.source script or a module instead", name)}
	}
	return nil
}

// loginVars are in every job's environment.
var loginVars = []string{"PATH", "LD_LIBRARY_PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD"}

// checkVarValue rejects what no exported variable can hold: a NUL byte.
// A line break is fine: the batch script exports it single-quoted (shquote).
func checkVarValue(v string, at keyPath) []issue {
	if strings.ContainsRune(v, 0) {
		return []issue{issuef(at, "%s contains a NUL byte, which no program can receive", quoteTOML(v))}
	}
	return nil
}

// [rendezvous]

func portRange(n int, at keyPath) []issue {
	if n < 1024 || n > 65535 {
		return []issue{issuef(at, "port %d out of range: want 1024-65535", n)}
	}
	return nil
}

// [slurm] time, also used by the command line's --time.

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
			d.problem(is.at.tomlKey(), is.atKey, "%s", is)
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
	// A value of another type (extends = 5) is reported as such already.
	if (f.Profile.Extends != "" || hasKey(f, extendsKey)) && !d.bad[extendsKey] {
		if strings.TrimSpace(f.Profile.Extends) == "" {
			d.problem(extendsKey, false, "extends: empty: name a profile or a path")
		}
	}
}

func hasKey(f *File, key string) bool {
	_, ok := f.pos.Key[key]
	return ok
}

// checkFile applies the rules between keys set in the same file. Across
// layers the merged profile follows Resolved.Validate instead: there a user
// switching flavor does not make the site's Open MPI options wrong, they
// are ignored.
func (d *decoder) checkFile() {
	f, p := d.f, &d.f.Profile
	if f.Has("mpi.flavor") {
		flavor := p.MPI.Flavor
		for _, key := range []string{"mpi.allow_run_as_root", "mpi.oversubscribe"} {
			o := launcherOptions[key]
			if v, _ := get(p, key); f.Has(key) && v.Bool() && !mpirun.Takes(flavor, o) {
				d.problem(key, false, "%s is an %s option, and this profile's flavor is %s", key, mpirun.TakenBy(o), flavor)
			}
		}
		if f.Has("mpi.bootstrap") {
			if err := mpirun.CheckBootstrap(flavor, p.MPI.Bootstrap); err != nil {
				d.problem("mpi.bootstrap", false, "mpi.bootstrap: %v (flavor %s)", err, flavor)
			}
		}
		if f.Has("mpi.srun_mpi") {
			if err := mpirun.CheckSrunMPI(flavor, p.MPI.SrunMPI); err != nil {
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
	if f.Has("mpi.launcher") && p.MPI.Launcher == mpirun.ProgramSrun && f.Has("mpi.bootstrap") {
		d.problem("mpi.bootstrap", false, "mpi.bootstrap: srun takes no bootstrap; it is for mpirun and mpiexec")
	}
	if f.Has("mpi.launcher") && p.MPI.Launcher != mpirun.ProgramSrun && f.Has("mpi.srun_mpi") {
		d.problem("mpi.srun_mpi", false, "mpi.srun_mpi: srun's --mpi plugin needs launcher srun, and this profile's launcher is %s", p.MPI.Launcher)
	}
}
