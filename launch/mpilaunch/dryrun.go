package mpilaunch

import (
	"io"

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
// launch itself. Its keys are an interface.
type DryRunJSON struct {
	Argv []string `json:"argv"`
	// Env is what every rank gets on argv, by name: the rendezvous,
	// --env, the profile's variables.
	Env map[string]string `json:"env"`
	// ForwardEnv names what the launcher hands the ranks from its own
	// environment (BATCHKIT_JOB_TOKEN: a run sets one when it is unset).
	ForwardEnv []string      `json:"forward_env"`
	Hostfile   *HostfileJSON `json:"hostfile,omitempty"` // a generated hostfile argv names
	Setup      string        `json:"setup,omitempty"`    // bash lines to source first: the profile's scripts
	Flavor     string        `json:"flavor"`
	Launcher   string        `json:"launcher"`
	NP         int           `json:"np"`
}

// HostfileJSON is a generated hostfile: write Text to Path before running
// argv.
type HostfileJSON struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

// DryRun is the launch as DryRunJSON, setup its bash lines to source
// first.
func DryRun(p Plan, setup string) (DryRunJSON, error) {
	argv, err := mpirun.Command(p.Spec)
	if err != nil {
		return DryRunJSON{}, launch.Bad(err)
	}
	out := DryRunJSON{Argv: argv, Env: p.Spec.Env, ForwardEnv: p.Spec.ForwardEnv, Setup: setup,
		Flavor: string(p.Spec.Flavor), Launcher: string(p.Spec.Launcher), NP: p.Spec.NP}
	if out.Env == nil {
		out.Env = map[string]string{}
	}
	if out.ForwardEnv == nil {
		out.ForwardEnv = []string{}
	}
	if p.Hostfile != "" {
		out.Hostfile = &HostfileJSON{Path: p.Spec.Hostfile, Text: p.Hostfile}
	}
	return out, nil
}
