package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/slurm"
)

func hostlistCommand() *cli.Command {
	return &cli.Command{
		Name:  "hostlist",
		Usage: "expand and compress Slurm host lists",
		Description: `Host lists as Slurm writes them (SLURM_JOB_NODELIST, scontrol), without Slurm installed.

Examples:
   batchkit hostlist expand 'node[001-003],gpu[1,3]'
   batchkit hostlist compress node1 node2 node3
   batchkit hostlist tasks-per-node "$SLURM_TASKS_PER_NODE"`,
		Subcommands: []*cli.Command{
			{
				Name:      "expand",
				Usage:     "print one host a line, like 'scontrol show hostnames'",
				ArgsUsage: "EXPR...",
				Description: `With --format json: one JSON array of the host names.

Examples:
   batchkit hostlist expand 'node[001-003],gpu[1,3]'
   batchkit hostlist expand "$SLURM_JOB_NODELIST"
   batchkit hostlist expand --format json "$SLURM_JOB_NODELIST"    # ["node001","node002"]`,
				Flags:  []cli.Flag{formatFlag()},
				Action: hostlistExpand,
			},
			{
				Name:      "compress",
				Usage:     "print the compact form of a host list, like 'scontrol show hostlist'",
				ArgsUsage: "HOST... | -",
				Description: `Hosts may be given as separate arguments, comma- or blank-separated, or as host
list expressions, which are expanded first (as scontrol does: n[1-2],n3 is n[1-3]).
With - they are read from standard input, one a line or comma-separated on a line
(a list too long for the command line). With --format json: the host list as one JSON string.

Examples:
   batchkit hostlist compress node1 node2 node3     # node[1-3]
   batchkit hostlist compress n01,n02,n04           # n[01-02,04]
   batchkit hostlist compress 'n[1-2]' n3           # n[1-3]
   scontrol show hostnames "$SLURM_JOB_NODELIST" | batchkit hostlist compress -
   batchkit hostlist compress --format json node1 node2               # "node[1-2]"`,
				Flags:  []cli.Flag{formatFlag()},
				Action: hostlistCompress,
			},
			{
				Name:      "tasks-per-node",
				Usage:     "expand SLURM_TASKS_PER_NODE's form '2(x3),1' to one count a line",
				ArgsUsage: "EXPR",
				Description: `With --format json: one JSON array of the counts.

Examples:
   batchkit hostlist tasks-per-node '2(x3),1'
   batchkit hostlist tasks-per-node "$SLURM_TASKS_PER_NODE"
   batchkit hostlist tasks-per-node --format json '2(x3),1'            # [2,2,2,1]`,
				Flags:  []cli.Flag{formatFlag()},
				Action: hostlistTasksPerNode,
			},
		},
	}
}

func hostlistExpand(c *cli.Context) error {
	asJSON, err := wantJSON(c)
	if err != nil {
		return err
	}
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
	if asJSON {
		return writeJSONLine(c.App.Writer, all)
	}
	return printLines(c.App.Writer, all)
}

func hostlistCompress(c *cli.Context) error {
	asJSON, err := wantJSON(c)
	if err != nil {
		return err
	}
	var hosts []string
	for _, a := range c.Args().Slice() {
		if a == "-" {
			hs, err := slurm.ReadHostlist(c.App.Reader, "standard input")
			if err != nil {
				return badInput(err)
			}
			hosts = append(hosts, hs...)
			continue
		}
		for _, expr := range strings.Fields(a) {
			hs, err := slurm.ExpandHostlist(expr)
			if err != nil {
				return badInput(err)
			}
			hosts = append(hosts, hs...)
		}
	}
	if len(hosts) == 0 {
		return usagef("hostlist compress needs host names, e.g. node1 node2 (or - to read them from standard input)")
	}
	if asJSON {
		return writeJSONLine(c.App.Writer, slurm.CompressHostlist(hosts))
	}
	return printLines(c.App.Writer, []string{slurm.CompressHostlist(hosts)})
}

func hostlistTasksPerNode(c *cli.Context) error {
	asJSON, err := wantJSON(c)
	if err != nil {
		return err
	}
	if c.NArg() != 1 {
		return usagef("hostlist tasks-per-node needs exactly one expression, e.g. '2(x3),1'")
	}
	counts, err := slurm.ParseTasksPerNode(c.Args().First())
	if err != nil {
		return badInput(err)
	}
	if asJSON {
		return writeJSONLine(c.App.Writer, counts)
	}
	lines := make([]string, len(counts))
	for i, n := range counts {
		lines[i] = fmt.Sprint(n)
	}
	return printLines(c.App.Writer, lines)
}

// printLines writes one line each through a buffer: a million hosts are a
// few write system calls, not a million.
func printLines(w io.Writer, lines []string) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	for _, l := range lines {
		bw.WriteString(l)
		bw.WriteByte('\n')
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing the hosts: %w", err)
	}
	return nil
}
