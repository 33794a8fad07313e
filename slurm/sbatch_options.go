package slurm

import (
	"fmt"
	"strings"
)

// OptionArg says whether an sbatch option takes a value.
type OptionArg int

const (
	NoValue       OptionArg = iota // --hold
	ValueRequired                  // --nodes=2, --nodes 2, -N2, -N 2
	ValueOptional                  // --exclusive or --exclusive=user, never a separate word
)

// SbatchOption is one option in sbatch's getopt_long table.
type SbatchOption struct {
	Long  string
	Short byte // 0: none
	Arg   OptionArg
}

// sbatchOptions are the options sbatch 22.05 takes on its command line and
// in #SBATCH lines: Slurm's src/common/slurm_opt.c, the ones with an sbatch
// setter. Used to read an option as sbatch would (abbreviations included),
// not to decide what sbatch accepts: an unknown option is sbatch's to refuse.
var sbatchOptions = func() []SbatchOption {
	const req, none, opt = ValueRequired, NoValue, ValueOptional
	return []SbatchOption{
		{"account", 'A', req}, {"acctg-freq", 0, req}, {"array", 'a', req}, {"batch", 0, req}, {"begin", 'b', req},
		{"bb", 0, req}, {"bbf", 0, req}, {"cluster-constraint", 0, req}, {"chdir", 'D', req}, {"cluster", 0, req},
		{"clusters", 'M', req}, {"comment", 0, req}, {"container", 0, req}, {"context", 0, req},
		{"contiguous", 0, none}, {"constraint", 'C', req}, {"core-spec", 'S', req}, {"cores-per-socket", 0, req},
		{"cpu-freq", 0, req}, {"cpus-per-gpu", 0, req}, {"cpus-per-task", 'c', req}, {"deadline", 0, req},
		{"delay-boot", 0, req}, {"dependency", 'd', req}, {"distribution", 'm', req}, {"error", 'e', req},
		{"exclude", 'x', req}, {"exclusive", 0, opt}, {"export", 0, req}, {"export-file", 0, req},
		{"extra-node-info", 'B', req}, {"get-user-env", 0, opt}, {"gid", 0, req}, {"gpu-bind", 0, req},
		{"gpu-freq", 0, req}, {"gpus", 'G', req}, {"gpus-per-node", 0, req}, {"gpus-per-socket", 0, req},
		{"gpus-per-task", 0, req}, {"gres", 0, req}, {"gres-flags", 0, req}, {"help", 'h', none}, {"hint", 0, req},
		{"hold", 'H', none}, {"ignore-pbs", 0, none}, {"input", 'i', req}, {"job-name", 'J', req},
		{"kill-on-invalid-dep", 0, req}, {"licenses", 'L', req}, {"mail-type", 0, req}, {"mail-user", 0, req},
		{"mcs-label", 0, req}, {"mem", 0, req}, {"mem-bind", 0, req}, {"mem-per-cpu", 0, req},
		{"mem-per-gpu", 0, req}, {"mincpus", 0, req}, {"network", 0, req}, {"nice", 0, opt}, {"no-kill", 'k', opt},
		{"no-requeue", 0, none}, {"nodefile", 'F', req}, {"nodelist", 'w', req}, {"nodes", 'N', req},
		{"ntasks", 'n', req}, {"ntasks-per-core", 0, req}, {"ntasks-per-gpu", 0, req}, {"ntasks-per-node", 0, req},
		{"ntasks-per-socket", 0, req}, {"ntasks-per-tres", 0, req}, {"open-mode", 0, req}, {"output", 'o', req},
		{"overcommit", 'O', none}, {"oversubscribe", 's', none}, {"parsable", 0, none}, {"partition", 'p', req},
		{"power", 0, req}, {"prefer", 0, req}, {"priority", 0, req}, {"profile", 0, req}, {"propagate", 0, opt},
		{"qos", 'q', req}, {"quiet", 'Q', none}, {"reboot", 0, none}, {"requeue", 0, none}, {"reservation", 0, req},
		{"signal", 0, req}, {"sockets-per-node", 0, req}, {"spread-job", 0, none}, {"switches", 0, req},
		{"tasks-per-node", 0, req}, {"test-only", 0, none}, {"thread-spec", 0, req}, {"threads-per-core", 0, req},
		{"time", 't', req}, {"time-min", 0, req}, {"tmp", 0, req}, {"uid", 0, req}, {"use-min-nodes", 0, none},
		{"verbose", 'v', none}, {"version", 'V', none}, {"usage", 0, none}, {"wait", 'W', none},
		{"wait-all-nodes", 0, req}, {"wckey", 0, req}, {"wrap", 0, req},
	}
}()

// LookupLong finds sbatch's option named name as getopt_long does: the
// exact name, else the one option name is an abbreviation of (--job-n is
// --job-name; --nod, which could be --nodes, --nodelist or --nodefile, is
// none).
func LookupLong(name string) (SbatchOption, bool) {
	var found []SbatchOption
	for _, o := range sbatchOptions {
		if o.Long == name {
			return o, true
		}
		if name != "" && strings.HasPrefix(o.Long, name) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		return SbatchOption{}, false
	}
	return found[0], true
}

// LookupShort finds sbatch's option -c.
func LookupShort(c byte) (SbatchOption, bool) {
	for _, o := range sbatchOptions {
		if o.Short != 0 && o.Short == c {
			return o, true
		}
	}
	return SbatchOption{}, false
}

// ReadOption reads one option as written to sbatch or on an #SBATCH line,
// in every spelling sbatch takes: --name=value, --name value, --name (or
// an abbreviation of name), -Xvalue, -X value, -X. ok is false for
// anything else; value is what follows the option, trimmed.
func ReadOption(raw string) (o SbatchOption, value string, ok bool) {
	s := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(raw), "#SBATCH"))
	switch {
	case strings.HasPrefix(s, "--"):
		name, value := s[2:], ""
		if i := strings.IndexAny(name, "= \t"); i >= 0 {
			name, value = name[:i], strings.TrimSpace(name[i+1:])
		}
		if o, ok = LookupLong(name); ok {
			return o, value, true
		}
	case len(s) >= 2 && s[0] == '-':
		if o, ok = LookupShort(s[1]); ok {
			return o, strings.TrimSpace(s[2:]), true
		}
	}
	return SbatchOption{}, "", false
}

// managedOptions are the sbatch options batchkit sbatch writes from its
// own flags and builds the launch line for (the rank layout), or names the
// job and its files with; given raw as well (--sbatch-arg, a profile's
// extra_sbatch) they would contradict it. Each maps to the flag to use.
var managedOptions = map[string]string{
	"nodes": "-N/--nodes", "ntasks": "-n/--ntasks", "ntasks-per-node": "--ntasks-per-node",
	"tasks-per-node": "--ntasks-per-node", "cpus-per-task": "-c/--cpus-per-task", "array": "-a/--array",
	"output": "-o/--output", "error": "-e/--error", "job-name": "-J/--job-name",
}

// ManagedOptionError is an option given raw that batchkit sbatch sets
// itself from Flag.
type ManagedOptionError struct {
	Raw    string // as given
	Option string // sbatch's long name
	Flag   string // batchkit sbatch's flag for it
}

func (e *ManagedOptionError) Error() string {
	return fmt.Sprintf("%q sets --%s, which batchkit sbatch writes itself: use its %s flag", e.Raw, e.Option, e.Flag)
}

// CheckManaged returns a *ManagedOptionError when raw, in any spelling
// ReadOption reads, sets an option batchkit sbatch writes itself.
func CheckManaged(raw string) error {
	o, _, ok := ReadOption(raw)
	if !ok {
		return nil
	}
	if flag, managed := managedOptions[o.Long]; managed {
		return &ManagedOptionError{Raw: raw, Option: o.Long, Flag: flag}
	}
	return nil
}
