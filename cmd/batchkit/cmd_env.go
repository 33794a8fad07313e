package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/internal/flagvalues"
)

func envCommand() *cli.Command {
	return &cli.Command{
		Name:  "env",
		Usage: "print this process's rank and topology, whatever launched it",
		Description: `Detects the launcher (torchrun, Open MPI, MPICH/Intel MPI Hydra, MVAPICH2, PMIx, Cray PALS,
a Slurm srun step, the Slurm batch script, or none) and prints one answer.

Formats:
   text      human-readable (default)
   json      one object: launcher, rank, world_size, local_rank, local_world_size,
             node_rank, num_nodes, hosts, master_addr, master_port, job_id
   shell     export lines for eval in sh, bash or zsh (values single-quoted): the torchrun
             contract and BATCHKIT_* extras
   torchrun  the torchrun variable contract only, KEY=VALUE per line

Examples:
   srun -N2 -n4 batchkit env --format json
   mpirun -n 4 batchkit env
   srun -n4 bash -c 'eval "$(batchkit env --format shell)"; ./train --rank "$RANK"'`,
		Flags: []cli.Flag{
			flagvalues.With(&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "text", Usage: "text, json, shell or torchrun"}, flagvalues.Keys(envsetup.TopologyFormats)),
			&cli.BoolFlag{Name: "allocation", Usage: "in a batch script, report the allocation's shape instead of rank 0 of 1"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("env takes no arguments, got %q", c.Args().First())
			}
			format := c.String("format")
			write, ok := envsetup.TopologyFormats[format]
			if !ok {
				return usagef("invalid --format %q: want text, json, shell or torchrun", format)
			}
			t, err := detect.Detect(os.Getenv, detect.Options{Allocation: c.Bool("allocation"), Hostname: hostname()})
			if err != nil {
				return badInput(err)
			}
			return write(c.App.Writer, t)
		},
	}
}
