package envsetup

import (
	"slices"
	"sort"
	"strconv"

	"github.com/batchkit/batchkit/envsetup/intelgpu"
	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/topology"
)

// The one precedence rule for a rank's environment, highest first:
//
//  1. what the launch dictates for this rank: the torchrun contract of its
//     topology (RANK ... MASTER_ADDR, MASTER_PORT; the rendezvous is decided
//     before, by detection or by LaunchEnv's policy) and the attempt's
//     token, run id and restart counts (batchkit run). Replaced whatever
//     else says, since a wrong rank or port silently corrupts the job.
//  2. the user's exported value (in the environment before sourcing).
//  3. the profile's [env] variables.
//  4. the sourced scripts' changes. Scripts change the user's environment
//     (PATH, LD_LIBRARY_PATH ...): a name the profile does not also set
//     gets the scripts' value even where the user had one, as in a shell.
//  5. batchkit's computed defaults: per-rank pinning (Pinning), which sets
//     only what layers 2-4 left unset, and the rank's Intel GPUs
//     (DeviceAffinity), which also replaces a ZE_AFFINITY_MASK that Slurm,
//     not the user, set.
//
// The batch template (templates/sbatch.sh.tmpl) applies layers 2-4 in
// shell when the job runs (batchkit_user, batchkit_export) to BatchEnv's
// variables; exec, run and mpirun's ranks get theirs from RankEnv.

// Attempt is what the ranks of one attempt of batchkit run share besides
// the topology; the caller decides the token (kept from the environment in
// the first attempt, new in every restart).
type Attempt struct {
	Token       string // envvars.Token
	RunID       string // envvars.RunID: the same in every attempt, as torchrun's
	Restart     int    // envvars.RestartCount: 0 in the first attempt
	MaxRestarts int    // envvars.MaxRestarts
}

// RankInput is everything a rank's environment depends on; RankEnv reads
// nothing else (no process environment, no files).
type RankInput struct {
	Topology topology.Topology
	// Attempt is batchkit run's; nil under any other launcher, whose
	// token and run id (if any) reach the rank as inherited.
	Attempt *Attempt
	// Environ is the inherited environment, before any script was
	// sourced: what is in it is what the user exported.
	Environ []string
	Sourced Changes           // what the profile's scripts changed (Source)
	Vars    map[string]string // the profile's [env] variables
	// Pin adds the pinning variables for CPUs (Pinning) and the rank's
	// Intel GPUs among GPUs (DeviceAffinity).
	Pin        bool
	CPUs       CPUSet
	PinOptions PinOptions
	GPUs       []intelgpu.Card
}

// Profiled is Environ with layers 2-4 applied: the environment the
// launcher's variables are read from (detection runs on it).
func (in RankInput) Profiled() []string {
	return Apply(in.Environ, WithVars(in.Environ, in.Sourced, in.Vars))
}

// RankEnv is one rank's environment as changes to in.Environ, by the
// precedence rule above, and pinning's warnings (one line each, for the
// CLI to print).
func RankEnv(in RankInput) (Changes, []string) {
	ch := WithVars(in.Environ, in.Sourced, in.Vars)
	var warnings []string
	if in.Pin {
		getenv := topology.MapEnv(Environ(Apply(in.Environ, ch)))
		var set map[string]string
		set, warnings = Pinning(in.Topology, in.CPUs, in.PinOptions, getenv)
		setAll(&ch, set)
		dev, w := DeviceAffinity(in.Topology, in.GPUs, getenv)
		setAll(&ch, dev)
		warnings = append(warnings, w...)
	}
	setAll(&ch, Torchrun(in.Topology))
	if a := in.Attempt; a != nil {
		setAll(&ch, map[string]string{
			envvars.Token:        a.Token,
			envvars.RunID:        a.RunID,
			envvars.RestartCount: strconv.Itoa(a.Restart),
			envvars.MaxRestarts:  strconv.Itoa(a.MaxRestarts),
		})
	}
	return ch, warnings
}

// setAll sets vars in c over anything c set or removed.
func setAll(c *Changes, vars map[string]string) {
	for k, v := range vars {
		c.Set[k] = v
	}
	c.Unset = slices.DeleteFunc(c.Unset, func(k string) bool { _, ok := vars[k]; return ok })
}

// Torchrun is the torchrun variable contract for t: what
// torch.distributed's env:// init method and most launch scripts read.
func Torchrun(t topology.Topology) map[string]string {
	return map[string]string{
		envvars.Rank:           strconv.Itoa(t.Rank),
		envvars.WorldSize:      strconv.Itoa(t.WorldSize),
		envvars.LocalRank:      strconv.Itoa(t.LocalRank),
		envvars.LocalWorldSize: strconv.Itoa(t.LocalWorldSize),
		envvars.NodeRank:       strconv.Itoa(t.NodeRank),
		envvars.GroupRank:      strconv.Itoa(t.NodeRank),
		envvars.GroupWorldSize: strconv.Itoa(t.NumNodes),
		envvars.MasterAddr:     t.MasterAddr,
		envvars.MasterPort:     strconv.Itoa(t.MasterPort),
	}
}

// Merge is environ with c applied, sorted: a child's environment that is
// the same from run to run.
func Merge(environ []string, c Changes) []string {
	out := Apply(environ, c)
	sort.Strings(out)
	return out
}
