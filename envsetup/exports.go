package envsetup

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/shquote"
	"github.com/batchkit/batchkit/topology"
)

// TopologyFormats are the ways 'batchkit env' prints a Topology, by the
// name --format takes: text for people, json one object, shell export
// lines for eval in sh, bash or zsh (the torchrun contract and BATCHKIT_*
// extras), torchrun the contract alone as KEY=VALUE lines. Every shell
// value is single-quoted (shquote).
var TopologyFormats = map[string]func(io.Writer, topology.Topology) error{
	"text":     writeTopologyText,
	"json":     writeTopologyJSON,
	"shell":    writeTopologyShell,
	"torchrun": writeTopologyTorchrun,
}

func writeTopologyJSON(w io.Writer, t topology.Topology) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func writeTopologyText(w io.Writer, t topology.Topology) error {
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

// shellAssignments is the torchrun contract, with extras batchkit's own
// BATCHKIT_* description of the launch.
func shellAssignments(t topology.Topology, extras bool) [][2]string {
	env := Torchrun(t)
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

func writeTopologyShell(w io.Writer, t topology.Topology) error {
	return writeAssignments(w, shellAssignments(t, true), "export ")
}

func writeTopologyTorchrun(w io.Writer, t topology.Topology) error {
	return writeAssignments(w, shellAssignments(t, false), "")
}
