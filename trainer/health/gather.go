package health

import (
	"fmt"

	"github.com/batchkit/batchkit/topology"
)

// Comm is what Gather and ProbeLinks need of the job's communicator
// (a trainer.Comm is one).
type Comm interface {
	Rank() int
	Size() int
	Allgather(send, recv []float64) error
	Barrier() error
}

// maxNode: a node's name is sent in this many bytes (a hostname's limit,
// HOST_NAME_MAX); a longer one is cut.
const maxNode = 64

// fields of a sample on the wire: rank, steps, compute, wait, comm, link,
// the node name's length, then its bytes.
const (
	fRank = iota
	fSteps
	fCompute
	fWait
	fComm
	fLink
	fNodeLen
	fNode
	width = fNode + maxNode
)

// Gather gives every rank every rank's sample (an Allgather: every rank of
// c calls it), in rank order.
func Gather(c Comm, s Sample) ([]Sample, error) {
	recv := make([]float64, width*c.Size())
	if err := c.Allgather(encode(s), recv); err != nil {
		return nil, err
	}
	out := make([]Sample, c.Size())
	for r := range out {
		out[r] = decode(recv[r*width : (r+1)*width])
	}
	return out, nil
}

func encode(s Sample) []float64 {
	v := make([]float64, width)
	v[fRank], v[fSteps] = float64(s.Rank), float64(s.Steps)
	v[fCompute], v[fWait], v[fComm], v[fLink] = s.Compute, s.Wait, s.Comm, s.LinkGBs
	node := s.Node[:min(len(s.Node), maxNode)]
	v[fNodeLen] = float64(len(node))
	for i := range len(node) {
		v[fNode+i] = float64(node[i])
	}
	return v
}

func decode(v []float64) Sample {
	node := make([]byte, min(int(v[fNodeLen]), maxNode))
	for i := range node {
		node[i] = byte(v[fNode+i])
	}
	return Sample{Rank: int(v[fRank]), Node: string(node), Steps: int(v[fSteps]),
		Compute: v[fCompute], Wait: v[fWait], Comm: v[fComm], LinkGBs: v[fLink]}
}

// NodeName is the name a rank's node has in the report: its entry in the
// launcher's host list (Slurm's node1, node2, which may be one machine),
// else hostname.
func NodeName(t topology.Topology, hostname string) string {
	if t.NodeRank >= 0 && t.NodeRank < len(t.Hosts) && len(t.Hosts) == t.NumNodes && t.Hosts[t.NodeRank] != "" {
		return t.Hosts[t.NodeRank]
	}
	return hostname
}

// Collect is the report of a run on every rank of c together: this rank's
// link is measured first (ProbeLinks, when c is a Broadcaster), then
// every rank's sample gathered and analysed with DefaultThresholds. Every
// rank returns the same report.
func Collect(c Comm, s Sample) (Report, error) {
	if b, ok := c.(Broadcaster); ok {
		var err error
		if s.LinkGBs, err = ProbeLinks(c, b, LinkBytes, LinkReps, nil); err != nil {
			return Report{}, fmt.Errorf("health report: link probe: %w", err)
		}
	}
	all, err := Gather(c, s)
	if err != nil {
		return Report{}, fmt.Errorf("health report: %w", err)
	}
	return Analyze(all, DefaultThresholds), nil
}
