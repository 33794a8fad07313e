package failfast

import (
	"fmt"
	"time"

	"github.com/batchkit/batchkit/envsetup/envvars"
	"github.com/batchkit/batchkit/topology"
)

// Config is one rank's watcher.
type Config struct {
	Rank, Size int
	Addr       string // the hub's host: MASTER_ADDR
	Port       int    // the hub's port: WatchPort(MASTER_PORT)
	Token      string // the job token, which both sides prove they know
	// Grace is how long a stopped child has between SIGTERM and SIGKILL.
	Grace time.Duration
	// JoinTimeout is how long a peer dials the hub, which listens only
	// once rank 0's batchkit exec has set up its environment (a profile's
	// scripts may take seconds).
	JoinTimeout time.Duration
	// ExitWait is how long a peer whose child has exited still tries to
	// join, to report the exit.
	ExitWait time.Duration
}

// Defaults for Config.
const (
	DefaultGrace       = 5 * time.Second
	DefaultJoinTimeout = 2 * time.Minute
	DefaultExitWait    = 10 * time.Second
)

// needed are the launchers that let the other ranks run on when one
// fails. Open MPI's mpirun, srun --kill-on-bad-exit and batchkit run stop
// the job themselves.
var needed = map[topology.Launcher]bool{topology.Hydra: true}

// WatchPort is the hub's port: MASTER_PORT + 15000 (topology.PortRange),
// below it when that is past 65535. Not MASTER_PORT+1: ports derived from
// consecutive job ids are consecutive (topology.PortForJob, 15000-29999), so
// job N's hub would take job N+1's MASTER_PORT on a shared node (seen with
// jobs running side by side on the test cluster); derived ports plus 15000
// are 30000-44999, never another job's MASTER_PORT.
func WatchPort(masterPort int) int {
	if masterPort+topology.PortRange <= 65535 {
		return masterPort + topology.PortRange
	}
	return masterPort - topology.PortRange
}

// FromEnv decides whether this rank watches and how. $BATCHKIT_FAIL_FAST
// (envvars.FailFast): "0" never, "1" under any launcher, unset or empty
// under the launchers that need it. One rank means no watch. token is the
// job's token (batchkit mpirun gives every rank one; in a batch script the
// ranks derive it from the job id, as the TCP collective does): without
// one there is no watch, and a forced watch is an error.
func FromEnv(getenv topology.Getenv, t topology.Topology, token func() (string, error)) (Config, bool, error) {
	v := getenv(envvars.FailFast)
	switch v {
	case "0":
		return Config{}, false, nil
	case "", "1":
	default:
		return Config{}, false, fmt.Errorf("%s=%q: want 0 or 1", envvars.FailFast, v)
	}
	if t.WorldSize < 2 || (v == "" && !needed[t.Launcher]) {
		return Config{}, false, nil
	}
	tok, err := token()
	if err == nil && tok == "" {
		err = fmt.Errorf("no job token (%s)", envvars.Token)
	}
	if err != nil {
		if v == "1" {
			return Config{}, false, fmt.Errorf("%s=1: %w", envvars.FailFast, err)
		}
		return Config{}, false, nil
	}
	return Config{Rank: t.Rank, Size: t.WorldSize, Addr: t.MasterAddr, Port: WatchPort(t.MasterPort), Token: tok,
		Grace: DefaultGrace, JoinTimeout: DefaultJoinTimeout, ExitWait: DefaultExitWait}, true, nil
}
