package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/envsetup/intelgpu"
	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/flagvalues"
	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/launch/failfast"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective/tcp"
)

func execCommand() *cli.Command { return execCommandAt("/") }

// execCommandAt is exec reading this node's CPUs (proc/self/status,
// sys/devices/system/cpu) and Intel GPUs (sys/class/drm, dev/dri) under
// root: "/", or a fake node in tests.
func execCommandAt(root string) *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run a program with the torchrun contract set from whatever launched this process",
		ArgsUsage: "[--] CMD [ARGS...]",
		Description: `Detects the topology like 'batchkit env', sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
NODE_RANK, GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR and MASTER_PORT on top of the inherited
environment, and replaces itself with CMD: signals reach CMD directly and its exit code is the
exit code. This makes torch.distributed.init_process_group(init_method="env://") work under
srun and any mpirun.

Under Hydra (MPICH's, Intel MPI's, MVAPICH2's mpiexec) and srun, which let the other ranks run on
when one fails (srun unless SLURM_KILL_BAD_EXIT=1, which batchkit's srun lines set), CMD runs as
a child instead, watched: when any rank's CMD exits non-zero or dies by a signal, every other
rank's CMD is stopped (SIGTERM, SIGKILL 5 s later) and exits with that status. BATCHKIT_FAIL_FAST=0 turns this off (the launcher's own behaviour); =1 turns it on under any
launcher that gives every rank BATCHKIT_JOB_TOKEN.

With --profile, the profile's environment comes first, as 'batchkit envsetup' prints it: its
source scripts (oneAPI setvars.sh ...) sourced by real bash, then its [env] variables (a value you
exported wins); CMD is looked up on the resulting PATH. $BATCHKIT_PROFILE alone does not do this:
under a launcher every rank would source the scripts again ('batchkit mpirun --profile' sources
them once, for all ranks).

With --pin (or BATCHKIT_PIN=1, which a profile can export) it also sets this rank's
OMP_NUM_THREADS, OMP_PLACES, OMP_PROC_BIND, KMP_BLOCKTIME, CCL_WORKER_COUNT, CCL_WORKER_AFFINITY,
I_MPI_PIN_DOMAIN, CCL_ATL_TRANSPORT and CCL_PROCESS_LAUNCHER/CCL_LOCAL_RANK/CCL_LOCAL_SIZE from
the topology and the node's CPUs, and on a node with Intel GPUs ZE_AFFINITY_MASK: one GPU or
tile per local rank, within what Slurm bound, the same mask in every rank so that xpu:LOCAL_RANK
is the rank's own (docs/reference/envsetup.md: "Per-rank pinning").
A value already in the environment wins; local rank 0 says so on stderr. With or without --pin,
local rank 0 warns when OMP_NUM_THREADS is more than the CPUs the rank is bound to (Open MPI's
--bind-to core: one core for all its threads).

Examples:
   srun -N2 --ntasks-per-node=2 batchkit exec -- python3 train.py
   mpirun -n 4 batchkit exec -- python3 train.py --epochs 3
   batchkit exec --profile intel-oneccl -- python3 -c 'import oneccl_bindings_for_pytorch'
   batchkit run -n 2 -- batchkit exec --pin -- python3 train.py`,
		Flags: []cli.Flag{
			flagvalues.With(&cli.StringFlag{Name: "profile", Usage: "site profile `NAME` or file whose [env] to set up first (" + profileOnlyFlag + ")"}, profileNames),
			sourceTimeoutFlag("source-timeout", "time for the profile's source scripts"),
			&cli.BoolFlag{Name: "pin", EnvVars: []string{envvars.Pin},
				Usage: "also set per-rank CPU pinning and oneCCL variables (OMP_NUM_THREADS, CCL_WORKER_AFFINITY ...)"},
		},
		Action: func(c *cli.Context) error { return execAction(c, root) },
	}
}

// execAction sets the rank's environment and replaces this process with
// the program; root is where the node's /proc, /sys and /dev are.
func execAction(c *cli.Context, root string) error {
	args := c.Args().Slice()
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return usagef("exec needs a command: batchkit exec -- CMD [ARGS...]")
	}
	in := envsetup.RankInput{Environ: os.Environ(), Pin: c.Bool("pin")}
	if c.IsSet("profile") {
		var err error
		if in.Sourced, in.Vars, err = execProfile(c, in.Environ); err != nil {
			return err
		}
	}
	t, err := detect.Detect(topology.EnvironEnv(in.Profiled()), detect.Options{Hostname: hostname()})
	if err != nil {
		return badInput(err)
	}
	if t.MasterAddr == "" {
		return usagef("cannot determine MASTER_ADDR for %d ranks on %d nodes under %s: set MASTER_ADDR (batchkit mpirun does) or run inside a Slurm allocation",
			t.WorldSize, t.NumNodes, t.Launcher)
	}
	in.Topology = t
	var warnings []string
	if in.Pin {
		if in.CPUs, err = envsetup.ReadCPUs(root); err != nil {
			return fmt.Errorf("exec --pin: %w", err)
		}
		// A node whose GPUs cannot be listed still gets its CPU pinning.
		if in.GPUs, err = intelgpu.Read(root); err != nil {
			warnings = append(warnings, fmt.Sprintf("devices: %v: ZE_AFFINITY_MASK not set", err))
		}
	}
	ch, w := envsetup.RankEnv(in)
	warnings = append(warnings, w...)
	// Pinning's warnings are the same on every rank of a node.
	if t.LocalRank == 0 {
		for _, w := range warnings {
			fmt.Fprintln(c.App.ErrWriter, "batchkit exec:", w)
		}
	}
	// CMD is looked up on the PATH the profile's scripts set.
	if err := applyToProcess(ch); err != nil {
		return err
	}
	env := envsetup.Merge(in.Environ, ch)
	getenv := topology.EnvironEnv(env)
	if t.LocalRank == 0 { // a rank whose threads share its cores: once a node, as above
		if w := threadsWarning(in, root, getenv); w != "" {
			fmt.Fprintln(c.App.ErrWriter, "batchkit exec:", w)
		}
	}
	watch, on, err := failfast.FromEnv(getenv, t, func() (string, error) { return tcp.ResolveToken(getenv, t) })
	if err != nil {
		return badInput(err)
	}
	if on {
		return execWatched(c, watch, args, env)
	}
	return execve(args, env)
}

// threadsWarning is envsetup.ThreadsWarning for this rank's CPUs, read
// here unless --pin read them; nothing when they cannot be read.
func threadsWarning(in envsetup.RankInput, root string, getenv topology.Getenv) string {
	cpus := in.CPUs
	if !in.Pin {
		var err error
		if cpus, err = envsetup.ReadCPUs(root); err != nil {
			return ""
		}
	}
	return envsetup.ThreadsWarning(getenv, cpus)
}

// execWatched runs args as a child that the other ranks' batchkit exec
// watch with this one (launch/failfast), where the launcher would not stop
// the job when a rank fails.
func execWatched(c *cli.Context, watch failfast.Config, args, env []string) error {
	sigs, stop := catchSignals()
	defer stop()
	cmd := exec.Command(args[0], args[1:]...) // looked up on the PATH the profile set, as execve does
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, os.Stdout, os.Stderr
	code, err := failfast.Run(c.Context, watch, cmd, sigs, c.App.ErrWriter)
	if err != nil {
		return cli.Exit(fmt.Sprintf("%v%s", err, launch.ExecHint(err)), code) // err names the program
	}
	return launchExit(code, nil)
}

// execProfile sources the profile's scripts (real bash, the edge) and
// returns what they changed and the profile's variables, for RankEnv.
func execProfile(c *cli.Context, environ []string) (envsetup.Changes, map[string]string, error) {
	r, err := loadProfile(c, nil)
	if err != nil {
		return envsetup.Changes{}, nil, err
	}
	sourced, err := sourceEnv(c.Context, environ, r.Profile.Env, c.Duration("source-timeout"))
	return sourced, r.Profile.Env.Vars, err
}

// execve replaces this process with args[0], found on PATH like a shell does.
// Failure to start follows the shell's convention: 127 not found, 126 not
// executable.
func execve(args []string, env []string) error {
	path, err := exec.LookPath(args[0])
	if err != nil {
		return cli.Exit(fmt.Sprintf("%s: %v", args[0], err), launch.StartCode(err))
	}
	err = syscall.Exec(path, args, env)
	return cli.Exit(fmt.Sprintf("exec %s: %v%s", path, err, launch.ExecHint(err)), launch.StartCode(err))
}
