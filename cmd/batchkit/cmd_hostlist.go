package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/slurm"
)

func hostlistCommand() *cli.Command {
	return &cli.Command{
		Name:  "hostlist",
		Usage: "expand and compress Slurm host lists",
		Subcommands: []*cli.Command{
			{
				Name:      "expand",
				Usage:     "print one host a line, like 'scontrol show hostnames'",
				ArgsUsage: "EXPR...",
				Description: `Examples:
   batchkit hostlist expand 'node[001-003],gpu[1,3]'
   batchkit hostlist expand "$SLURM_JOB_NODELIST"`,
				Action: func(c *cli.Context) error {
					if c.NArg() == 0 {
						return usagef("hostlist expand needs an expression, e.g. 'node[1-4]'")
					}
					// Every expression first: a bad one prints nothing.
					var all []string
					for _, expr := range c.Args().Slice() {
						hosts, err := slurm.ExpandHostlist(expr)
						if err != nil {
							return badInput(err)
						}
						all = append(all, hosts...)
					}
					for _, h := range all {
						fmt.Fprintln(c.App.Writer, h)
					}
					return nil
				},
			},
			{
				Name:      "compress",
				Usage:     "print the compact form of a host list, like 'scontrol show hostlist'",
				ArgsUsage: "HOST...",
				Description: `Hosts may be given as separate arguments, comma- or blank-separated, or as host
list expressions, which are expanded first (as scontrol does: n[1-2],n3 is n[1-3]).

Examples:
   batchkit hostlist compress node1 node2 node3     # node[1-3]
   batchkit hostlist compress n01,n02,n04           # n[01-02,04]
   batchkit hostlist compress 'n[1-2]' n3           # n[1-3]`,
				Action: func(c *cli.Context) error {
					var hosts []string
					for _, a := range c.Args().Slice() {
						for _, expr := range strings.Fields(a) {
							hs, err := slurm.ExpandHostlist(expr)
							if err != nil {
								return badInput(err)
							}
							hosts = append(hosts, hs...)
						}
					}
					if len(hosts) == 0 {
						return usagef("hostlist compress needs host names, e.g. node1 node2")
					}
					fmt.Fprintln(c.App.Writer, slurm.CompressHostlist(hosts))
					return nil
				},
			},
			{
				Name:      "tasks-per-node",
				Usage:     "expand SLURM_TASKS_PER_NODE's form '2(x3),1' to one count a line",
				ArgsUsage: "EXPR",
				Description: `Examples:
   batchkit hostlist tasks-per-node '2(x3),1'
   batchkit hostlist tasks-per-node "$SLURM_TASKS_PER_NODE"`,
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usagef("hostlist tasks-per-node needs exactly one expression, e.g. '2(x3),1'")
					}
					counts, err := slurm.ParseTasksPerNode(c.Args().First())
					if err != nil {
						return badInput(err)
					}
					for _, n := range counts {
						fmt.Fprintln(c.App.Writer, n)
					}
					return nil
				},
			},
		},
	}
}
