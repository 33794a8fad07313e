package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/detect"
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

Examples:
   srun -N2 --ntasks-per-node=2 batchkit exec -- python3 train.py
   mpirun -n 4 batchkit exec -- python3 train.py --epochs 3`,
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			if len(args) == 0 {
				return usagef("exec needs a command: batchkit exec -- CMD [ARGS...]")
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
