package envsetup

import (
	"fmt"
	"strconv"

	"github.com/batchkit/batchkit/topology"
)

// PortFrom says which layer of MasterPort's policy decided a port.
type PortFrom int

const (
	// PortLater: nothing decides it where the launch is prepared; each
	// rank's batchkit exec derives it from its job and step (detect),
	// which gives torchrun's default outside a job.
	PortLater PortFrom = iota
	PortFlag           // --master-port
	PortGiven          // a MASTER_PORT already set for every rank
	PortFixed          // the profile's [rendezvous] fixed port
	PortJob            // derived from the job id (topology.PortForJob)
	PortFree           // a free port on the launching host
)

// PortInput is what a launch's MASTER_PORT is decided from.
type PortInput struct {
	Flag int // --master-port; 0: none
	// Given is a MASTER_PORT set for all ranks when GivenSet: mpirun's
	// --env, or the environment a job's ranks run in. Kept as it is:
	// whoever reads it (detection) checks it.
	Given    string
	GivenSet bool
	Fixed    int    // the profile's fixed port (profile.Rendezvous.FixedPort); 0: none
	JobID    string // the rendezvous id (topology.RendezvousID); "": outside a job
	// Free finds a free port here; nil when the ranks cannot use one
	// (their MASTER_ADDR is not known here, or the launch is not run here).
	Free func() (int, error)
}

// Port is a decided MASTER_PORT: Value is "" under PortLater.
type Port struct {
	Value string
	From  PortFrom
}

// MasterPort is the one MASTER_PORT policy, highest first: --master-port,
// a MASTER_PORT given for all ranks, the profile's fixed port, the job's
// port, a free port here, else each rank's detection. batchkit mpirun
// (LaunchEnv), the batch script (BatchEnv, the given layer applied at run
// time by batchkit_export) and doctor all decide by it.
func MasterPort(in PortInput) (Port, error) {
	switch {
	case in.Flag > 0:
		return Port{strconv.Itoa(in.Flag), PortFlag}, nil
	case in.GivenSet:
		return Port{in.Given, PortGiven}, nil
	case in.Fixed > 0:
		return Port{strconv.Itoa(in.Fixed), PortFixed}, nil
	case in.JobID != "":
		return Port{strconv.Itoa(topology.PortForJob(in.JobID)), PortJob}, nil
	case in.Free != nil:
		n, err := in.Free()
		if err != nil {
			return Port{}, fmt.Errorf("finding a free MASTER_PORT: %w", err)
		}
		return Port{strconv.Itoa(n), PortFree}, nil
	}
	return Port{From: PortLater}, nil
}
