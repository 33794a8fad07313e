package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/envsetup/envvars"
	"github.com/batchkit/batchkit/launch/local"
	"github.com/batchkit/batchkit/topology"
)

func execCommand() *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run a program with the torchrun contract set from whatever launched this process",
		ArgsUsage: "[--] CMD [ARGS...]",
		Description: `Detects the topology like 'batchkit env', sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
NODE_RANK, GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR and MASTER_PORT on top of the inherited
environment, and replaces itself with CMD: signals reach CMD directly and its exit code is the
exit code. This makes torch.distributed.init_process_group(init_method="env://") work under
srun and any mpirun.

With --profile, the profile's environment comes first, as 'batchkit envsetup' prints it: its
source scripts (oneAPI setvars.sh ...) sourced by real bash, then its [env] variables (a value you
exported wins); CMD is looked up on the resulting PATH. $BATCHKIT_PROFILE alone does not do this:
under a launcher every rank would source the scripts again ('batchkit mpirun --profile' sources
them once, for all ranks).

With --pin (or BATCHKIT_PIN=1, which a profile can export) it also sets this rank's
OMP_NUM_THREADS, KMP_AFFINITY, KMP_BLOCKTIME, CCL_WORKER_COUNT, CCL_WORKER_AFFINITY,
I_MPI_PIN_DOMAIN, CCL_ATL_TRANSPORT and CCL_PROCESS_LAUNCHER/CCL_LOCAL_RANK/CCL_LOCAL_SIZE from
the topology and the node's CPUs (README: "Intel oneAPI and oneCCL: per-rank pinning"). A value
already in the environment wins; local rank 0 says so on stderr.

Examples:
   srun -N2 --ntasks-per-node=2 batchkit exec -- python3 train.py
   mpirun -n 4 batchkit exec -- python3 train.py --epochs 3
   batchkit exec --profile intel-oneccl -- python3 -c 'import oneccl_bindings_for_pytorch'
   batchkit run -n 2 -- batchkit exec --pin -- python3 train.py`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "profile", Usage: "site profile `NAME` or file whose [env] to set up first"},
			&cli.DurationFlag{Name: "source-timeout", Value: envsetup.DefaultTimeout, Usage: "time for the profile's source scripts"},
			&cli.BoolFlag{Name: "pin", EnvVars: []string{envvars.Pin},
				Usage: "also set per-rank CPU pinning and oneCCL variables (OMP_NUM_THREADS, CCL_WORKER_AFFINITY ...)"},
		},
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			if len(args) == 0 {
				return usagef("exec needs a command: batchkit exec -- CMD [ARGS...]")
			}
			if c.IsSet("profile") {
				if err := execProfileEnv(c); err != nil {
					return err
				}
			}
			t, err := detect.Detect(os.Getenv, detect.Options{Hostname: hostname()})
			if err != nil {
				return badInput(err)
			}
			if t.MasterAddr == "" {
				return usagef("cannot determine MASTER_ADDR for %d ranks on %d nodes under %s: set MASTER_ADDR (batchkit mpirun does) or run inside a Slurm allocation",
					t.WorldSize, t.NumNodes, t.Launcher)
			}
			env := t.TorchrunEnv()
			if c.Bool("pin") {
				if err := addPinning(env, t, c.App.ErrWriter); err != nil {
					return err
				}
			}
			return execve(args, topology.MergeEnviron(os.Environ(), env))
		},
	}
}

// execProfileEnv sets up the profile's environment in this process, which
// CMD then inherits and is looked up in.
func execProfileEnv(c *cli.Context) error {
	r, err := loadProfile(c, nil)
	if err != nil {
		return err
	}
	ch, err := setUpEnv(c.Context, os.Environ(), r.Profile.Env, nil, c.Duration("source-timeout"))
	if err != nil {
		return err
	}
	return applyToProcess(ch)
}

// addPinning adds envsetup.Pinning's variables for this rank to env. Its
// warnings are the same on every rank of a node, so local rank 0 prints them.
func addPinning(env map[string]string, t topology.Topology, stderr io.Writer) error {
	cpus, err := envsetup.ReadCPUs("/")
	if err != nil {
		return fmt.Errorf("exec --pin: %w", err)
	}
	set, warnings := envsetup.Pinning(t, cpus, envsetup.PinOptions{}, os.Getenv)
	for k, v := range set {
		env[k] = v
	}
	if t.LocalRank == 0 {
		for _, w := range warnings {
			fmt.Fprintln(stderr, "batchkit exec:", w)
		}
	}
	return nil
}

// execve replaces this process with args[0], found on PATH like a shell does.
// Failure to start follows the shell's convention: 127 not found, 126 not
// executable.
func execve(args []string, env []string) error {
	path, err := exec.LookPath(args[0])
	if err != nil {
		code := 127
		if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EISDIR) {
			code = 126 // found, but not something to run (bash says the same)
		}
		return cli.Exit(fmt.Sprintf("%s: %v", args[0], err), code)
	}
	err = syscall.Exec(path, args, env)
	code := 126
	if errors.Is(err, syscall.ENOENT) {
		code = 127
	}
	return cli.Exit(fmt.Sprintf("exec %s: %v%s", path, err, local.ExecHint(err)), code)
}
