package detect

import (
	"fmt"
	"strconv"

	"github.com/batchkit/batchkit/topology"
)

// partial is what a layer's variables say, before finish applies the job's
// hosts, the node placement and the rendezvous address.
type partial struct {
	launcher             topology.Launcher
	rank, size           topology.Value
	localRank, localSize topology.Value
	nodeRank, numNodes   topology.Value
	jobID, stepID        string
	killOnBadExit        bool
	hosts                []string // nil unless the layer lists them
	markerVar, marker    string
}

// count is one count of a layer: where it is read from and where it goes.
type count struct {
	dst  *topology.Value
	what string // in errors: "conflicting rank"
	from vars
}

func (l layer) counts(p *partial) []count {
	return []count{
		{&p.rank, "rank", l.rank},
		{&p.size, "world size", l.size},
		{&p.localRank, "local rank", l.localRank},
		{&p.localSize, "local world size", l.localSize},
		{&p.nodeRank, "node rank", l.nodeRank},
		{&p.numNodes, "number of nodes", l.numNodes},
	}
}

// readCounts reads every count of l, checking aliases against each other;
// it does not check that the layer is complete (require).
func readCounts(getenv topology.Getenv, l layer) (partial, error) {
	p := partial{launcher: l.launcher, jobID: topology.FirstString(getenv, l.jobID...),
		stepID: topology.FirstString(getenv, l.stepID...)}
	if n, err := strconv.Atoi(topology.FirstString(getenv, l.killOnBadExit...)); err == nil && n != 0 {
		p.killOnBadExit = true
	}
	p.markerVar, p.marker = l.marker(getenv)
	for _, c := range l.counts(&p) {
		v, err := readVars(getenv, l.launcher, c.what, c.from)
		if err != nil {
			return p, err
		}
		*c.dst = v
	}
	return p, nil
}

// readVars reads one count from the first group of v with a variable set.
func readVars(getenv topology.Getenv, l topology.Launcher, what string, v vars) (topology.Value, error) {
	for _, group := range v {
		if x, err := topology.Int(getenv, l, what, group...); err != nil || x.Set() {
			return x, err
		}
	}
	return topology.Value{}, nil
}

// require returns an IncompleteError unless the counts a rank cannot do
// without are known: rank, world size, local rank, and the local size, or,
// where a tasks-per-node list gives that, the node rank that indexes it.
func (l layer) require(p partial) error {
	type need struct {
		v    topology.Value
		from vars
	}
	needs := []need{{p.rank, l.rank}, {p.size, l.size}, {p.localRank, l.localRank}, {p.localSize, l.localSize}}
	if l.tasksPerNode != nil {
		needs[3] = need{p.nodeRank, l.nodeRank}
	}
	for _, c := range needs {
		if c.v.Set() {
			continue
		}
		missing := flat(c.from)
		if len(missing) == 0 {
			missing = []string{"a world size variable"}
		}
		return &topology.IncompleteError{Launcher: l.launcher, Have: p.markerVar, HaveValue: p.marker, MissingAny: missing}
	}
	return nil
}

// checkSizes rejects what no launcher sets: a size of 0, a rank outside its
// size. It names the variable.
func checkSizes(p partial) error {
	if err := checkPositive(p); err != nil {
		return err
	}
	return checkRanges(p)
}

// checkPositive rejects a size of 0, naming the variable. It runs before
// placement divides by the sizes or a tasks-per-node list is indexed.
func checkPositive(p partial) error {
	for _, v := range []topology.Value{p.size, p.localSize, p.numNodes} {
		if v.Set() && v.N < 1 {
			return &topology.VarError{Var: v.Var, Value: v.Raw, Msg: "a size must be at least 1"}
		}
	}
	return nil
}

// checkRanges rejects a rank, local rank or node rank outside its size.
func checkRanges(p partial) error {
	for _, c := range []struct {
		v, of topology.Value
		what  string
		of1   string // of's value in words, %d its value
		le    bool   // v may equal of: a count, not an index
	}{
		{p.rank, p.size, "rank", "world size %d", false},
		{p.localRank, p.localSize, "local rank", "local world size %d", false},
		{p.localSize, p.size, "local world size", "world size %d", true},
		{p.nodeRank, p.numNodes, "node rank", "%d nodes", false},
		{p.numNodes, p.size, "number of nodes", "world size %d", true},
	} {
		if !c.v.Set() || !c.of.Set() || c.v.N < c.of.N || (c.le && c.v.N == c.of.N) {
			continue
		}
		return &topology.VarError{Var: c.v.Var, Value: c.v.Raw,
			Msg: fmt.Sprintf("%s %d out of range for %s (%s=%s)", c.what, c.v.N, fmt.Sprintf(c.of1, c.of.N), c.of.Var, c.of.Raw)}
	}
	return nil
}

// fromPartial turns what a layer said into a Topology; a node rank or count
// it did not say is -1, for finish to place.
func fromPartial(p partial) topology.Topology {
	t := topology.Topology{
		Launcher:       p.launcher,
		Rank:           p.rank.N,
		WorldSize:      p.size.N,
		LocalRank:      p.localRank.N,
		LocalWorldSize: p.localSize.N,
		NodeRank:       -1,
		NumNodes:       -1,
		Hosts:          p.hosts,
		JobID:          p.jobID,
		StepID:         p.stepID,
		KillOnBadExit:  p.killOnBadExit,
	}
	if p.nodeRank.Set() {
		t.NodeRank = p.nodeRank.N
	}
	if p.numNodes.Set() {
		t.NumNodes = p.numNodes.N
	}
	return t
}
