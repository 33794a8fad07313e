package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/envsetup"
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

Examples:
   srun -N2 --ntasks-per-node=2 batchkit exec -- python3 train.py
   mpirun -n 4 batchkit exec -- python3 train.py --epochs 3
   batchkit exec --profile intel-oneccl -- python3 -c 'import oneccl_bindings_for_pytorch'`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "profile", Usage: "site profile `NAME` or file whose [env] to set up first"},
			&cli.DurationFlag{Name: "source-timeout", Value: envsetup.DefaultTimeout, Usage: "time for the profile's source scripts"},
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
			return execve(args, topology.MergeEnviron(os.Environ(), t.TorchrunEnv()))
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
