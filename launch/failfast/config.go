package failfast

import (
	"fmt"
	"strconv"
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

// needed says, for every launcher, whether it lets the other ranks run on
// when one exits non-zero, in MPI_Init or not (a PyTorch gloo rank never
// calls it): then batchkit exec watches. Read from the launchers' sources:
//   - Hydra (MPICH, Intel MPI) kills the job only when a rank that opened its
//     PMI connection dies (hydra pm/pmiserv/pmip_cb.c): the others run on.
//     Measured for Intel MPI 2021.18's mpiexec.hydra too (the wheel): after
//     a rank's exit 3 or SIGKILL the others ran to their end (30 s), Hydra
//     reporting only then (integration TestFailFast's intelmpi rows).
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
//   - srun lets the others run on unless given --kill-on-bad-exit=1 or
//     KillOnBadExit=1 is in slurm.conf (default 0; docs/slurm-observed.md).
//     Neither shows in the tasks' environment, but SLURM_KILL_BAD_EXIT=1,
//     the flag as a variable, does: batchkit's own srun lines set it, and
//     then the step is not watched (needsWatch). A user's `srun batchkit
//     exec` is.
//   - Open MPI's mpirun, torchrun and batchkit run stop the job. Single
//     and SlurmBatch are one process.
var needed = map[topology.Launcher]bool{
	topology.Single: false, topology.Torchrun: false, topology.Slurm: true, topology.SlurmBatch: false,
	topology.OpenMPI: false, topology.Hydra: true, topology.MVAPICH: true, topology.PMIx: false, topology.PALS: false,
}

// needsWatch is needed's row, except that an srun step whose srun was
// told SLURM_KILL_BAD_EXIT (any integer but 0, as srun parses it) is
// stopped by srun itself.
func needsWatch(getenv topology.Getenv, l topology.Launcher) bool {
	n, err := strconv.Atoi(getenv(envvars.SlurmKillBadExit))
	srunStops := l == topology.Slurm && err == nil && n != 0
	return needed[l] && !srunStops
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
	if t.WorldSize < 2 || (v == "" && !needsWatch(getenv, t.Launcher)) {
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
