package sbatch

import (
	"fmt"
	"strings"

	"github.com/batchkit/batchkit/slurm"
)

// OptionHint says how to pass the sbatch option in word w, which
// batchkit sbatch has no flag for: by the flag it has (hasFlag: one of
// batchkit sbatch's flags is named long), spelled in full, or
// with --sbatch-arg. "" when w is not sbatch's (or abbreviates several).
// A single-dash word is a long name when sbatch has one (as batchkit's
// flags may be written), else a short option with its value attached, as
// sbatch reads it.
func OptionHint(w string, hasFlag func(long string) bool) string {
	name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
	written := w
	if hasValue {
		written = strings.TrimSuffix(w, "="+value)
	}
	o, ok := slurm.LookupLong(name)
	if !ok && !strings.HasPrefix(w, "--") && name != "" {
		if o, ok = slurm.LookupShort(name[0]); ok && len(name) > 1 {
			value, hasValue = name[1:], true
		}
	}
	switch {
	case !ok:
		return ""
	case hasFlag(o.Long):
		return fmt.Sprintf("%s: batchkit sbatch spells this option --%s", written, o.Long)
	}
	use := "--sbatch-arg=--" + o.Long
	switch {
	case hasValue && o.Arg != slurm.NoValue:
		use += "=" + value
	case o.Arg == slurm.ValueRequired:
		use += "=VALUE"
	case o.Arg == slurm.ValueOptional:
		use += "[=VALUE]"
	}
	return fmt.Sprintf("%s: batchkit sbatch has no flag for this sbatch option: use %s", written, use)
}
