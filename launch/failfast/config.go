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

// needed says, for every launcher, whether it lets the other ranks run on
// when one exits non-zero, in MPI_Init or not (a PyTorch gloo rank never
// calls it): then batchkit exec watches. Read from the launchers' sources:
//   - Hydra (MPICH, Intel MPI) kills the job only when a rank that opened its
//     PMI connection dies (hydra pm/pmiserv/pmip_cb.c): the others run on.
//   - MVAPICH2: mpirun_rsh ends the job on any non-zero exit (mpispawn.c
//     child_handler reports it, wfe_mpirun.c fails the run, mpirun_rsh.c
//     cleans up), but MVAPICH2's mpiexec is Hydra and sets the same
//     MV2_COMM_WORLD_* variables: watched, redundantly under mpirun_rsh.
//     github.com/kumattau/mvapich2 (2.3.7-1) src/pm/mpirun, src/pm/hydra.
//   - PRRTE's prterun (bare PMIx): a non-zero exit is an error by default
//     (state_base_frame.c error_non_zero_exit = true) and errmgr_dvm.c
//     terminates the job. github.com/openpmix/prrte.
//   - Cray PALS mpiexec: --abort-on-failure is on by default
//     (github.com/Cray-HPE/craycli cray/modules/mpiexec/cli.py).
//   - srun lets the others run on unless given --kill-on-bad-exit=1 (which
//     batchkit's own srun lines pass) or KillOnBadExit=1 is in slurm.conf
//     (default 0; docs/slurm-observed.md): a user's `srun batchkit exec`
//     has neither, so the step is watched.
//   - Open MPI's mpirun, torchrun and batchkit run stop the job. Single
//     and SlurmBatch are one process.
var needed = map[topology.Launcher]bool{
	topology.Single: false, topology.Torchrun: false, topology.Slurm: true, topology.SlurmBatch: false,
	topology.OpenMPI: false, topology.Hydra: true, topology.MVAPICH: true, topology.PMIx: false, topology.PALS: false,
}

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
