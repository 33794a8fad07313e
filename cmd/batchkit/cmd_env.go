package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/flagvalues"
	"github.com/batchkit/batchkit/internal/shquote"
	"github.com/batchkit/batchkit/topology"
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
			flagvalues.With(&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "text", Usage: "text, json, shell or torchrun"}, flagvalues.Keys(envFormats)),
			&cli.BoolFlag{Name: "allocation", Usage: "in a batch script, report the allocation's shape instead of rank 0 of 1"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("env takes no arguments, got %q", c.Args().First())
			}
			format := c.String("format")
			write, ok := envFormats[format]
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

var envFormats = map[string]func(io.Writer, topology.Topology) error{
	"text":     writeText,
	"json":     writeJSON,
	"shell":    writeShell,
	"torchrun": writeTorchrun,
}

func writeJSON(w io.Writer, t topology.Topology) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func writeText(w io.Writer, t topology.Topology) error {
	master := t.MasterAddr
	if master == "" {
		master = "(unknown: set MASTER_ADDR)"
	}
	job := t.JobID
	if job == "" {
		job = "-"
	}
	_, err := fmt.Fprintf(w, "launcher     %s\nrank         %d of %d\nlocal rank   %d of %d\nnode         %d of %d\nhosts        %s\nmaster       %s:%d\njob id       %s\n",
		t.Launcher, t.Rank, t.WorldSize, t.LocalRank, t.LocalWorldSize, t.NodeRank, t.NumNodes,
		strings.Join(t.Hosts, ","), master, t.MasterPort, job)
	return err
}

// shellAssignments is the torchrun contract plus batchkit's own extras.
func shellAssignments(t topology.Topology, extras bool) [][2]string {
	env := envsetup.Torchrun(t)
	var out [][2]string
	for _, k := range envvars.Torchrun {
		out = append(out, [2]string{k, env[k]})
	}
	if extras {
		out = append(out,
			[2]string{envvars.ShellLauncher, string(t.Launcher)},
			[2]string{envvars.ShellNumNodes, strconv.Itoa(t.NumNodes)},
			[2]string{envvars.ShellHosts, strings.Join(t.Hosts, ",")},
			[2]string{envvars.ShellJobID, t.JobID},
		)
	}
	return out
}

func writeAssignments(w io.Writer, kvs [][2]string, prefix string) error {
	for _, kv := range kvs {
		q, err := shquote.Quote(kv[1])
		if err != nil {
			return fmt.Errorf("%s: %w", kv[0], err)
		}
		if _, err := fmt.Fprintf(w, "%s%s=%s\n", prefix, kv[0], q); err != nil {
			return err
		}
	}
	return nil
}

func writeShell(w io.Writer, t topology.Topology) error {
	return writeAssignments(w, shellAssignments(t, true), "export ")
}

func writeTorchrun(w io.Writer, t topology.Topology) error {
	return writeAssignments(w, shellAssignments(t, false), "")
}
