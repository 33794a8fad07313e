package sbatch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/batchkit/batchkit/profile"
	"github.com/batchkit/batchkit/slurm"
	"github.com/batchkit/batchkit/templates"
)

// Sample is a batch script with every field set and every list non-empty,
// the data `batchkit profile check` renders a site's templates with, so
// that a template naming a field slurm.Script lacks fails there and not at
// submission. Its test checks by reflection that no field is left zero: a
// field added to slurm.Script must be added here. The values are plain
// words, as a real profile's mostly are, so that word and directive
// accept them.
func Sample() slurm.Script {
	return slurm.Script{
		Profile:    "sample",
		Directives: []slurm.Directive{{Flag: "partition", Value: "gpu"}, {Flag: "time", Value: "30"}},
		Modules:    []string{"intel/oneapi"},
		Sources:    []slurm.Source{{Path: "/opt/intel/oneapi/setvars.sh", Args: []string{"--force"}}},
		Env:        []slurm.EnvVar{{Name: "FI_PROVIDER", Value: "psm3"}},
		Launch:     []string{"srun", "batchkit", "exec", "--", "python3", "train.py"},
		Requeue:    true,
		Bindings:   &slurm.Bindings{Python: "python3", Probe: "print(1)"},
		Wheels:     "/opt/venv",
		ShieldUSR1: true,
	}
}

// MinimalSample is the least a batch script holds, a profile's name and
// the launch line (a profile that sets nothing, under no flags): rendered
// too, it takes the other branch of each {{if}} and {{range}}.
func MinimalSample() slurm.Script {
	full := Sample()
	return slurm.Script{Profile: full.Profile, Launch: full.Launch}
}

// FlagAloneSample is Sample with a directive that has no value
// (--exclusive): a template must print it alone, never --exclusive="".
func FlagAloneSample() slurm.Script {
	s := Sample()
	s.Directives = append(s.Directives, slurm.Directive{Flag: "exclusive"})
	return s
}

// Samples are all three, as templates.Set.Check takes them.
func Samples() map[string][]templates.Sample {
	return map[string][]templates.Sample{templates.Sbatch: {
		{What: "a sample script, every field set", Data: Sample()},
		{What: "a minimal script, only the profile name and launch line", Data: MinimalSample()},
		{What: "a sample script with a flag that takes no value, --exclusive", Data: FlagAloneSample()},
	}}
}

// CheckTemplates loads the profile's template directory as sbatch would
// and renders its templates with Samples, which finds what loading cannot:
// a field the script lacks. The directory need exist only where jobs are
// submitted: a missing one gets a note that it was not checked; one that is
// a file or a FIFO is an error, from Load. An error is a *profile.Problem
// at the profile's templates key.
func CheckTemplates(r *profile.Resolved) (note string, err error) {
	dir := r.Profile.Templates
	if dir == "" {
		return "", nil
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("templates %s is not on this machine: not checked", dir), nil
	}
	set, err := templates.Load(dir)
	if err == nil {
		err = set.Check(Samples())
	}
	if err != nil {
		o, _ := r.Origin("templates")
		return "", &profile.Problem{File: o.Source, Line: o.Line, Col: o.Col, Msg: "templates: " + err.Error()}
	}
	return "", nil
}
