package failfast

import (
	"fmt"
	"time"

	"github.com/batchkit/batchkit/envvars"
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

// needsWatch says whether the launcher lets the other ranks run on when
// one exits non-zero, so that batchkit exec watches: its traits row
// (topology.Traits.LeavesRanksRunning, which says why for each launcher),
// unless it was told to end the job itself (an srun given
// SLURM_KILL_BAD_EXIT: Topology.KillOnBadExit).
func needsWatch(t topology.Topology) bool {
	return t.Launcher.Traits().LeavesRanksRunning && !t.KillOnBadExit
}

// WatchPort is the hub's port, which every rank derives from MASTER_PORT
// alone. It lies outside two ranges:
//   - the derived MASTER_PORTs (topology.PortForJob, 15000-29999): ports of
//     consecutive job ids are consecutive, so MASTER_PORT+1 would be job
//     N+1's MASTER_PORT on a shared node (seen on the test cluster);
//   - Linux's default ephemeral range (32768-60999), where any process's
//     outgoing connection may hold the port: rank 0 then cannot listen and
//     the job runs unwatched (seen in CI, "bind: address already in use").
//
// MASTER_PORT's offset o in the derived range (mod 15000) maps one to one
// onto 1024-14999 (o < 13976), then 30000-31023: jobs with derived ports
// never share a watch port. A port a service holds leaves that job
// unwatched, with rank 0's one-line warning.
func WatchPort(masterPort int) int {
	const low, lowN = 1024, topology.PortBase - 1024
	o := ((masterPort-topology.PortBase)%topology.PortRange + topology.PortRange) % topology.PortRange
	if o < lowN {
		return low + o
	}
	return 30000 + o - lowN
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
	if t.WorldSize < 2 || (v == "" && !needsWatch(t)) {
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
