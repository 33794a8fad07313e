package envsetup

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/batchkit/batchkit/envvars"
)

// Why a variable cannot be exported to every rank of a launch.
var (
	ErrEnvSyntax  = errors.New("not NAME=VALUE")
	ErrEnvToken   = errors.New("the job token would be on the launcher's command line")
	ErrEnvNodes   = errors.New("the launch sets the node count")
	ErrEnvPerRank = errors.New("a per-rank variable")
)

// EnvError is a --env entry SharedEnv refuses; Err is one of the ErrEnv
// values above. The message is the CLI's, as the user wrote the entry.
type EnvError struct {
	Entry string // NAME=VALUE as given
	Name  string
	Err   error
}

func (e *EnvError) Error() string {
	switch e.Err {
	case ErrEnvToken:
		// Entry is not repeated: its value is the secret.
		return fmt.Sprintf("--env %s would put the job token on the launcher's command line, which every user can read: export %s instead", e.Name, e.Name)
	case ErrEnvNodes:
		return fmt.Sprintf("invalid --env %q: batchkit mpirun sets %s from the hosts it places ranks on", e.Entry, e.Name)
	case ErrEnvPerRank:
		return fmt.Sprintf("invalid --env %q: batchkit exec sets %s on every rank (it differs from rank to rank)", e.Entry, e.Name)
	}
	return fmt.Sprintf("invalid --env %q: want NAME=VALUE with NAME of letters, digits and _", e.Entry)
}

func (e *EnvError) Unwrap() error { return e.Err }

// SharedEnv is batchkit mpirun's --env entries as the variables every rank
// of the launch gets (LaunchInput.Env), the last of a name winning. It
// refuses what cannot be the same for all ranks or is not the user's to
// set: the per-rank torchrun variables (RankEnv's layer 1, set by
// batchkit exec), the node count (LaunchEnv's), and the job token, which
// -x/-genv would put on a command line every user can read.
func SharedEnv(entries []string) (map[string]string, error) {
	env := make(map[string]string, len(entries))
	for _, kv := range entries {
		k, v, ok := strings.Cut(kv, "=")
		var why error
		switch {
		case !ok || !ValidName(k): // the name mpirun.ValidEnvName accepts too
			why = ErrEnvSyntax
		case k == envvars.Token:
			why = ErrEnvToken
		case k == envvars.NumNodes:
			why = ErrEnvNodes
		case slices.Contains(envvars.PerRank, k):
			why = ErrEnvPerRank
		}
		if why != nil {
			return nil, &EnvError{Entry: kv, Name: k, Err: why}
		}
		env[k] = v
	}
	return env, nil
}
