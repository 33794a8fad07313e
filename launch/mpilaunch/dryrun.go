package mpilaunch

import (
	"io"

	"github.com/batchkit/batchkit/internal/jsonstr"
	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/mpirun"
)

// WriteDryRun writes the launch as shell text: setup first (the bash lines
// that source the profile's scripts, which a dry run does not run), then
// the launcher's command line.
func WriteDryRun(w io.Writer, p Plan, setup string) error {
	out, err := mpirun.DryRun(p.Spec, p.Hostfile)
	if err != nil {
		return launch.Bad(err)
	}
	_, err = io.WriteString(w, setup+out)
	return err
}

// DryRunJSON is --dry-run --format json: what a script needs to run the
// launch itself. Its keys are an interface. Strings that may hold any
// bytes are jsonstr's: lossless.
type DryRunJSON struct {
	Argv []jsonstr.String `json:"argv"`
	// Env is what every rank gets on argv, by name: the rendezvous,
	// --env, the profile's variables.
	Env map[string]jsonstr.String `json:"env"`
	// ForwardEnv names what the launcher hands the ranks from its own
	// environment (BATCHKIT_JOB_TOKEN: a run sets one when it is unset).
	ForwardEnv []string       `json:"forward_env"`
	Hostfile   *HostfileJSON  `json:"hostfile,omitempty"` // a generated hostfile argv names
	Setup      jsonstr.String `json:"setup,omitempty"`    // bash lines to source first: the profile's scripts
	Flavor     string         `json:"flavor"`
	Launcher   string         `json:"launcher"`
	NP         int            `json:"np"`
}

// HostfileJSON is a generated hostfile: write Text to Path before running
// argv.
type HostfileJSON struct {
	Path jsonstr.String `json:"path"`
	Text jsonstr.String `json:"text"`
}

// DryRun is the launch as DryRunJSON, setup its bash lines to source
// first.
func DryRun(p Plan, setup string) (DryRunJSON, error) {
	argv, err := mpirun.Command(p.Spec)
	if err != nil {
		return DryRunJSON{}, launch.Bad(err)
	}
	out := DryRunJSON{Argv: jsonstr.Strings(argv), Env: jsonstr.Map(p.Spec.Env), ForwardEnv: p.Spec.ForwardEnv,
		Setup: jsonstr.String(setup), Flavor: string(p.Spec.Flavor), Launcher: string(p.Spec.Launcher), NP: p.Spec.NP}
	if out.ForwardEnv == nil {
		out.ForwardEnv = []string{}
	}
	if p.Hostfile != "" {
		out.Hostfile = &HostfileJSON{Path: jsonstr.String(p.Spec.Hostfile), Text: jsonstr.String(p.Hostfile)}
	}
	return out, nil
}
