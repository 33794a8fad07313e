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

// maxNode: a node's or host's name is sent in this many bytes (a
// hostname's limit, HOST_NAME_MAX); a longer one is cut. maxCPU: CPUs up
// to this id are sent, 32 to a float64 (which holds 53 bits exactly).
// maxErr: a ring link's error is sent in this many bytes.
const (
	maxNode = 64
	maxCPU  = 1024
	maxErr  = 240
)

// fields of a sample on the wire: rank, steps, compute, wait, comm, link,
// the median step's compute, the node's and the host's name (a length,
// then the bytes), the CPUs (a bit mask), the ring link to the next rank
// and its error (a length, then the bytes).
const (
	fRank = iota
	fSteps
	fCompute
	fWait
	fComm
	fLink
	fComputeStep
	fNode
	fHost    = fNode + 1 + maxNode
	fCPUs    = fHost + 1 + maxNode
	fNext    = fCPUs + maxCPU/32
	fNextErr = fNext + 1
	width    = fNextErr + 1 + maxErr
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
	v[fCompute], v[fWait], v[fComm], v[fLink], v[fComputeStep] = s.Compute, s.Wait, s.Comm, s.LinkGBs, s.ComputeStep
	putString(v[fNode:fHost], s.Node)
	putString(v[fHost:fCPUs], s.Host)
	v[fNext] = s.NextGBs
	putString(v[fNextErr:width], s.NextErr)
	for _, c := range s.CPUs {
		if c >= 0 && c < maxCPU {
			v[fCPUs+c/32] += float64(uint32(1) << (c % 32))
		}
	}
	return v
}

// putString writes s into v: its length, then its bytes, cut to fit.
func putString(v []float64, s string) {
	s = s[:min(len(s), len(v)-1)]
	v[0] = float64(len(s))
	for i := range len(s) {
		v[1+i] = float64(s[i])
	}
}

func getString(v []float64) string {
	b := make([]byte, min(int(v[0]), len(v)-1))
	for i := range b {
		b[i] = byte(v[1+i])
	}
	return string(b)
}

func decode(v []float64) Sample {
	var cpus []int
	for c := range maxCPU {
		if uint32(v[fCPUs+c/32])&(1<<(c%32)) != 0 {
			cpus = append(cpus, c)
		}
	}
	return Sample{Rank: int(v[fRank]), Node: getString(v[fNode:fHost]), Host: getString(v[fHost:fCPUs]), CPUs: cpus, Steps: int(v[fSteps]),
		Compute: v[fCompute], Wait: v[fWait], Comm: v[fComm], LinkGBs: v[fLink], ComputeStep: v[fComputeStep],
		NextGBs: v[fNext], NextErr: getString(v[fNextErr:width])}
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
// links are measured first (ProbeLinks, when c is a Broadcaster; then
// ProbeRing), then every rank's sample gathered (with its Host and CPUs,
// Here, when s has none) and analysed with DefaultThresholds. Every rank
// returns the same report.
func Collect(c Comm, s Sample) (Report, error) {
	if s.Host == "" {
		s.Host, s.CPUs = Here()
	}
	if b, ok := c.(Broadcaster); ok {
		var err error
		if s.LinkGBs, err = ProbeLinks(c, b, LinkBytes, linkReps(c.Size()), nil); err != nil {
			return Report{}, fmt.Errorf("health report: link probe: %w", err)
		}
	}
	next, err := ProbeRing(c, RingOptions{Host: s.Host})
	if err != nil {
		return Report{}, fmt.Errorf("health report: %w", err)
	}
	s.NextGBs, s.NextErr = next.GBs, next.Err
	all, err := Gather(c, s)
	if err != nil {
		return Report{}, fmt.Errorf("health report: %w", err)
	}
	return Analyze(all, DefaultThresholds), nil
}

// linkReps: LinkReps for each root up to 25 ranks, fewer above (at least
// one), so that a large job's probe stays near 256 timed broadcasts, each
// of which crosses every rank.
func linkReps(n int) int { return max(1, min(LinkReps, 256/max(n, 1))) }
