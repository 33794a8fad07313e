// Package topology is batchkit's one vocabulary for "who am I in this job":
// rank, world size, node-local placement, the node list and the rendezvous
// address. Every launcher (Slurm, the MPI flavors, torchrun, batchkit's own
// local launcher) is translated into a Topology value once, and every other
// package takes that value instead of re-reading SLURM_* or PMI_* itself.
//
// This package holds the type, its validation, the errors that name a bad
// variable, the helpers that read one value (Int, Value), the
// deterministic MASTER_PORT formula, and the launchers with a traits row
// each (launchers.go): what stops a job, which PMI it offers, what pinning
// needs of it. Which launcher started a process, and which variables say
// so, is package detect's alone; what a rank's environment gets from a
// Topology is envsetup's (RankEnv).
package topology

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/internal/jsonstr"
)

// DefaultPort is torchrun's default MASTER_PORT.
const DefaultPort = 29500

// Topology is the placement of one process in a job.
type Topology struct {
	Launcher       Launcher `json:"launcher"`
	Rank           int      `json:"rank"`
	WorldSize      int      `json:"world_size"`
	LocalRank      int      `json:"local_rank"`
	LocalWorldSize int      `json:"local_world_size"`
	NodeRank       int      `json:"node_rank"`
	NumNodes       int      `json:"num_nodes"`
	Hosts          []string `json:"hosts"`
	MasterAddr     string   `json:"master_addr"`
	MasterPort     int      `json:"master_port"`
	JobID          string   `json:"job_id"`

	// What else detection read from the launcher's variables, so that no
	// consumer reads them again. Not in `batchkit env --format json`,
	// whose object is the placement above.

	// StepID is the launch's own id inside job JobID: an srun step's,
	// also under torchrun variables that restate its rank (batchkit
	// exec's); "" under every other launcher, whose ranks carry a stale
	// daemon step's. With JobID it names the launch (RendezvousID): its
	// MASTER_PORT and the TCP backend's job token.
	StepID string `json:"-"`
	// PMI is what this process is offered to wire up an MPI library: its
	// launcher's (Traits.PMI), and what the variables say besides:
	// srun --mpi=pmi2/pmix's plugin, or an MPI launcher's under the
	// torchrun or batchkit exec it started.
	PMI PMI `json:"-"`
	// KillOnBadExit: the launcher was told to end the job when a rank
	// exits non-zero (srun's SLURM_KILL_BAD_EXIT), whatever its
	// Traits.LeavesRanksRunning says.
	KillOnBadExit bool `json:"-"`
}

// MarshalJSON writes the placement (`batchkit env --format json`), the
// strings read from the environment (hosts, MASTER_ADDR, the job id) in
// jsonstr's lossless encoding: a byte that is not UTF-8 as \udcXX, not
// encoding/json's U+FFFD. The keys keep their order.
func (t Topology) MarshalJSON() ([]byte, error) {
	type placement Topology // the fields, without this method
	return json.Marshal(struct {
		placement
		Hosts      []jsonstr.String `json:"hosts"`
		MasterAddr jsonstr.String   `json:"master_addr"`
		MasterPort int              `json:"master_port"`
		JobID      jsonstr.String   `json:"job_id"`
	}{placement(t), jsonstr.Strings(t.Hosts), jsonstr.String(t.MasterAddr), t.MasterPort, jsonstr.String(t.JobID)})
}

// Getenv looks a variable up; "" means unset. Detection never reads the
// process environment directly so that it stays a pure, testable function.
type Getenv func(string) string

// MapEnv adapts a map to Getenv.
func MapEnv(m map[string]string) Getenv { return func(k string) string { return m[k] } }

// EnvironEnv adapts an os.Environ-style list ("K=V") to Getenv; later entries win.
func EnvironEnv(environ []string) Getenv {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return MapEnv(m)
}

// Validate checks the invariants every consumer relies on. Detection checks
// each variable as it reads it; this is the last line of defence.
func (t Topology) Validate() error {
	switch {
	case t.WorldSize < 1:
		return fmt.Errorf("world size %d: must be at least 1", t.WorldSize)
	case t.Rank < 0 || t.Rank >= t.WorldSize:
		return fmt.Errorf("rank %d out of range for world size %d", t.Rank, t.WorldSize)
	case t.LocalWorldSize < 1 || t.LocalWorldSize > t.WorldSize:
		return fmt.Errorf("local world size %d out of range for world size %d", t.LocalWorldSize, t.WorldSize)
	case t.LocalRank < 0 || t.LocalRank >= t.LocalWorldSize:
		return fmt.Errorf("local rank %d out of range for local world size %d", t.LocalRank, t.LocalWorldSize)
	case t.NumNodes < 1 || t.NumNodes > t.WorldSize:
		return fmt.Errorf("number of nodes %d out of range for world size %d", t.NumNodes, t.WorldSize)
	case t.NodeRank < 0 || t.NodeRank >= t.NumNodes:
		return fmt.Errorf("node rank %d out of range for %d nodes", t.NodeRank, t.NumNodes)
	case t.MasterPort < 0 || t.MasterPort > 65535:
		return fmt.Errorf("master port %d out of range 1-65535", t.MasterPort)
	}
	return nil
}

// Port range for ports derived from a job id. It sits below Linux's default
// ephemeral range (32768-60999) so that a derived port is not already taken
// by some outgoing connection, and above the common service ports.
const (
	PortBase  = 15000
	PortRange = 15000 // ports PortBase .. PortBase+PortRange-1 = 15000..29999
)

// PortForJob derives MASTER_PORT from a job id so that every rank of the job
// computes the same port without communicating, and concurrent jobs on the
// same first node rarely collide:
//
//	numeric id n:       15000 + n mod 15000
//	any other id s:     15000 + FNV-1a-32(s) mod 15000
//	no id:              29500 (torchrun's default)
//
// Consecutive Slurm job ids therefore get consecutive ports.
func PortForJob(jobID string) int {
	if jobID == "" {
		return DefaultPort
	}
	if n, err := strconv.ParseUint(jobID, 10, 64); err == nil {
		return PortBase + int(n%PortRange)
	}
	h := fnv.New32a()
	h.Write([]byte(jobID))
	return PortBase + int(h.Sum32()%PortRange)
}

// RendezvousID names one launch inside job jobID for PortForJob and the
// TCP backend's job token: the job id for its first srun step (or none),
// "JOB.STEP" for a later one. Two srun steps of one job running at once
// (srun ... & srun ... &) thus get different ports and tokens, and cannot
// join each other's worlds; a job's first step keeps the job's port.
func RendezvousID(jobID, stepID string) string {
	if jobID == "" || stepID == "" || stepID == "0" {
		return jobID
	}
	return jobID + "." + stepID
}
