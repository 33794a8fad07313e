// Package envvars names the environment variables batchkit sets for a
// rank, or reads from it, once. It is a leaf: topology, detect, the
// launchers, the profile checks and the trainer's collective backends all
// refer to these names, and none of them may pull in what envsetup needs
// (bash, mpirun). What each rank's environment gets is decided in
// envsetup (RankEnv, LaunchEnv); this package only spells the names.
package envvars

// The torchrun contract: what torch.distributed's env:// init method and
// most launch scripts read. RANK to GROUP_WORLD_SIZE differ from rank to
// rank; MASTER_ADDR and MASTER_PORT are the same on every rank.
const (
	Rank           = "RANK"
	WorldSize      = "WORLD_SIZE"
	LocalRank      = "LOCAL_RANK"
	LocalWorldSize = "LOCAL_WORLD_SIZE"
	NodeRank       = "NODE_RANK"
	GroupRank      = "GROUP_RANK"
	GroupWorldSize = "GROUP_WORLD_SIZE"
	MasterAddr     = "MASTER_ADDR"
	MasterPort     = "MASTER_PORT"
)

// Torchrun lists the contract's names in a stable, readable order.
var Torchrun = []string{
	Rank, WorldSize, LocalRank, LocalWorldSize,
	NodeRank, GroupRank, GroupWorldSize, MasterAddr, MasterPort,
}

// PerRank are the contract's names whose value differs from rank to rank:
// only a per-rank launcher (batchkit exec, batchkit run) can set them.
var PerRank = []string{Rank, WorldSize, LocalRank, LocalWorldSize, NodeRank, GroupRank, GroupWorldSize}

// Token carries a secret shared by all ranks of one run, for
// authenticating a TCP rendezvous. It is passed in the environment only,
// never on a command line, where other users could read it.
const Token = "BATCHKIT_JOB_TOKEN"

// RunID is torchrun's run id, which batchkit run sets too: it marks the
// torchrun variables as a real launcher's, so that detection lets them win
// over an outer launcher's (batchkit run inside an srun step) instead of
// taking them for leftovers of an outer job.
const RunID = "TORCHELASTIC_RUN_ID"

// RestartCount and MaxRestarts tell a rank, as torchrun does, how many
// times its world has been restarted and how many restarts are allowed.
// Detection ignores them (only RunID matters to it).
const (
	RestartCount = "TORCHELASTIC_RESTART_COUNT"
	MaxRestarts  = "TORCHELASTIC_MAX_RESTARTS"
)

// NumNodes carries the number of nodes a launch uses to its ranks.
// Hydra and mpirun_rsh tell a rank only how many ranks share its node; on
// the last node, which may be short, that does not say which node it is
// (3 ranks, 1 on this node: node 1 of 2 at 2 per node, node 2 of 3 at 1).
// batchkit mpirun knows the hosts and sets it for each launch, and never
// passes an inherited one on: a stale count would misplace ranks. (Not
// BATCHKIT_NUM_NODES, which `batchkit env --format shell` exports.)
const NumNodes = "BATCHKIT_MPIRUN_NUM_NODES"

// Profile names the site profile when no --profile flag does.
const Profile = "BATCHKIT_PROFILE"

// ProfilePath lists directories (colon-separated) searched for a
// profile's NAME.toml before the user's and the system's.
const ProfilePath = "BATCHKIT_PROFILE_PATH"

// Pin turns on per-rank pinning in batchkit exec, as --pin does; a
// profile's [env] can export it.
const Pin = "BATCHKIT_PIN"

// MasterAddrCheck set to 0 stops rank 0 of the TCP backend from checking
// that MASTER_ADDR resolves to an address of its own host, for NAT'd or
// containerised setups where the address the other ranks dial is on no
// interface of rank 0's host.
const MasterAddrCheck = "BATCHKIT_MASTER_ADDR_CHECK"

// FailFast set to 0 stops batchkit exec from watching the other ranks
// (launch/failfast), leaving a failed rank to the launcher as before; 1
// makes it watch under any launcher. Unset, it watches where the launcher
// does not stop the job itself (Hydra, MVAPICH2's mpiexec, srun without
// SlurmKillBadExit: topology.Traits.LeavesRanksRunning).
const FailFast = "BATCHKIT_FAIL_FAST"

// SlurmKillBadExit is Slurm's, not batchkit's: srun reads it as
// --kill-on-bad-exit (0 or 1) and, like its whole environment, passes it
// to the tasks. batchkit's srun lines set it to 1, so that a rank's
// batchkit exec can tell that srun ends the step when a rank fails.
const SlurmKillBadExit = "SLURM_KILL_BAD_EXIT"

// Requeue set to 1 on the launch line of a batch script of `batchkit
// sbatch --requeue` tells every rank that an exit 75 requeues the job, so
// that batchkit train can say at start when it has nothing to resume from.
const Requeue = "BATCHKIT_REQUEUE"

// TCPShm set to 0 keeps the TCP backend off shared memory between the ranks
// of one host (every byte then goes through the loopback sockets).
const TCPShm = "BATCHKIT_TCP_SHM"

// MPIHandoff and CCLHandoff are the sizes in bytes from which a call of the
// MPI or oneCCL backend runs on its worker thread instead of the calling
// goroutine's.
const (
	MPIHandoff = "BATCHKIT_MPI_HANDOFF"
	CCLHandoff = "BATCHKIT_CCL_HANDOFF"
)

// IdlePoll is "MIN,MAX" in microseconds: the sleeps between the tests of a
// collective the MPI or oneCCL backend makes beside compute (the trainer's
// gradient buckets).
const IdlePoll = "BATCHKIT_IDLE_POLL"

// What `batchkit env --format shell` exports besides the torchrun contract,
// for a user's script; batchkit itself never reads them.
const (
	ShellLauncher = "BATCHKIT_LAUNCHER"
	ShellNumNodes = "BATCHKIT_NUM_NODES"
	ShellHosts    = "BATCHKIT_HOSTS"
	ShellJobID    = "BATCHKIT_JOB_ID"
)

// Var is an environment variable of batchkit's own and what it does, as a
// user reads it in the man page.
type Var struct{ Name, Means string }

// Read lists every BATCHKIT_* variable batchkit reads: the man page's
// ENVIRONMENT is written from it, and TestReadIsComplete checks that no
// code spells another one (only Exported's, which it writes).
var Read = []Var{
	{Profile, "the site profile a command uses when no --profile names one, where its --profile help says so (docs/reference/profiles.md, \"Which profile a command uses\")"},
	{ProfilePath, "colon-separated directories searched for NAME.toml before ~/.config/batchkit/profiles and /etc/batchkit/profiles"},
	{Token, "the secret every rank of a job shares, for the TCP backend's rendezvous and the fail-fast watch; batchkit run and mpirun set one, else it is derived from the launcher's job id and ~/.config/batchkit/job-secret"},
	{Pin, "1: batchkit exec sets each rank's CPU pinning and oneCCL variables (OMP_NUM_THREADS, CCL_WORKER_AFFINITY ...), as --pin"},
	{FailFast, "0: batchkit exec leaves a failed rank to the launcher; 1: it watches the other ranks under any launcher (mpirun and sbatch --no-fail-fast, --fail-fast)"},
	{MasterAddrCheck, "0: rank 0 of the TCP backend does not check that MASTER_ADDR is an address of its own host (NAT, containers)"},
	{NumNodes, "set by batchkit mpirun for its ranks: the number of nodes of the launch, which Hydra does not tell a rank"},
	{Requeue, "set to 1 by batchkit sbatch --requeue for its ranks: an exit 75 requeues the job"},
	{TCPShm, "0: the TCP backend does not use shared memory between the ranks of one host"},
	{MPIHandoff, "bytes from which a call of the MPI backend runs on its worker thread (0: none does, but the idle calls of train's gradient buckets)"},
	{CCLHandoff, "bytes from which a call of the oneCCL backend runs on its worker thread (0: every call)"},
	{IdlePoll, "MIN,MAX in microseconds: an MPI or oneCCL allreduce of train's gradient buckets tests for completion and sleeps between tests, from MIN doubling to MAX (default 2,64)"},
}

// Exported are the variables batchkit writes for a user and never reads.
var Exported = []string{ShellLauncher, ShellNumNodes, ShellHosts, ShellJobID}
