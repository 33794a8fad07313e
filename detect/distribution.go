package detect

import (
	"fmt"
	"slices"
	"strings"

	"github.com/batchkit/batchkit/internal/infile"
	"github.com/batchkit/batchkit/slurm"
	"github.com/batchkit/batchkit/topology"
)

// Where rank 0 of a Slurm step runs, which MASTER_ADDR must name. srun
// exports the node-level distribution it used to every task; with
// SLURM_HOSTFILE set it always uses arbitrary, whatever -m says (seen on
// the local cluster, docs/ has nothing more).
const (
	slurmDistribution = "SLURM_DISTRIBUTION"
	slurmHostfile     = "SLURM_HOSTFILE"
	slurmHetSize      = "SLURM_HET_SIZE"
	// maxHostfile bounds the host file read: one line per task of a
	// million-task step.
	maxHostfile = 16 << 20
)

// distribution is one node-level value of SLURM_DISTRIBUTION.
type distribution struct {
	name string
	// hostfile: task i runs on the i-th host of SLURM_HOSTFILE (or of
	// srun -w, which leaves no trace in the tasks' environment). Else
	// rank 0 runs on the first node of the step's node list.
	hostfile bool
}

// distributions are the values srun 22.05 exports; block, cyclic and plane
// all start with task 0 on node 0, whatever they do next.
var distributions = []distribution{
	{name: ""}, // unset: srun's default, block
	{name: "block"},
	{name: "cyclic"},
	{name: "plane"}, // blocks of SLURM_DIST_PLANESIZE tasks
	{name: "arbitrary", hostfile: true},
}

// setMasterHint ends every error that leaves rank 0's host unknown.
const setMasterHint = "cannot tell which host holds rank 0; set MASTER_ADDR to it"

// readDistribution returns the row of SLURM_DISTRIBUTION; a value no row
// has is an error naming it.
func readDistribution(getenv topology.Getenv) (distribution, error) {
	raw := getenv(slurmDistribution)
	name := slurm.NodeDistribution(raw)
	i := slices.IndexFunc(distributions, func(d distribution) bool { return d.name == name })
	if i < 0 {
		return distribution{}, &topology.VarError{Var: slurmDistribution, Value: raw,
			Msg: "not a distribution batchkit knows: " + setMasterHint}
	}
	return distributions[i], nil
}

// readHostfile reads and parses the host file named by SLURM_HOSTFILE, the
// hosts of the first n tasks. The file may be anything: a FIFO or a device
// is refused unopened, a large one unread (infile.Read).
func readHostfile(getenv topology.Getenv, opts Options, n int) (slurm.Hostfile, error) {
	path := getenv(slurmHostfile)
	if path == "" {
		return slurm.Hostfile{}, &topology.VarError{Var: slurmDistribution, Value: getenv(slurmDistribution),
			Msg: "no " + slurmHostfile + " says where the tasks run (srun -m arbitrary -w): " + setMasterHint}
	}
	read := opts.ReadFile
	if read == nil {
		read = func(p string) ([]byte, error) { return infile.Read(p, maxHostfile) }
	}
	b, err := read(path)
	if err == nil {
		var h slurm.Hostfile
		if h, err = slurm.ParseHostfile(path, b, n); err == nil {
			return h, nil
		}
	}
	return slurm.Hostfile{}, &topology.VarError{Var: slurmHostfile, Value: path,
		Msg: fmt.Sprintf("%v: %s", oneLine(err), setMasterHint), Err: err}
}

// stepMaster returns the host of rank 0 of the Slurm step t, whose hosts
// are the step's node list, when MASTER_ADDR does not say.
func stepMaster(getenv topology.Getenv, opts Options, t *topology.Topology) (string, error) {
	if len(t.Hosts) == 1 {
		return t.Hosts[0], nil // one node: rank 0 is there, whatever the distribution
	}
	d, err := readDistribution(getenv)
	if err != nil || !d.hostfile {
		return t.Hosts[0], err
	}
	h, err := readHostfile(getenv, opts, t.WorldSize)
	if err != nil {
		return "", err
	}
	// Every task checks its own line: a file changed since srun read it
	// (or another one on this node) would otherwise send the ranks to
	// different rendezvous points, and some task would hang.
	if t.NodeRank < 0 || t.NodeRank >= len(t.Hosts) || h.Host(t.Rank) != t.Hosts[t.NodeRank] {
		return "", &topology.VarError{Var: slurmHostfile, Value: h.Path,
			Msg: fmt.Sprintf("lists %q for rank %d, which runs elsewhere (the file changed since srun read it?): %s", h.Host(t.Rank), t.Rank, setMasterHint)}
	}
	if !slices.Contains(t.Hosts, h.Host(0)) {
		return "", &topology.VarError{Var: slurmHostfile, Value: h.Path,
			Msg: fmt.Sprintf("lists %q for rank 0, which is not in the step's node list: %s", h.Host(0), setMasterHint)}
	}
	return h.Host(0), nil
}

// allocationShape is the shape a step of all the job's size tasks takes in
// the allocation the batch script l holds, as srun would start it, and the
// index of rank 0's node in it. With a host file the file says; else the
// tasks-per-node list, which the allocation of a heterogeneous job lacks.
func allocationShape(getenv topology.Getenv, opts Options, l layer, p partial, hosts []string) (s slurm.Shape, rank0 int, err error) {
	d, err := readDistribution(getenv)
	if err != nil {
		return s, 0, err
	}
	if d.hostfile || getenv(slurmHostfile) != "" {
		h, err := readHostfile(getenv, opts, p.size.N)
		if err != nil {
			return s, 0, err
		}
		s, err = h.Shape(slurmHostfile, hosts)
		return s, slices.Index(s.Hosts, h.Host(0)), err
	}
	s, ok, err := readShape(getenv, l, hosts)
	switch {
	case err != nil:
		return s, 0, err
	case !ok && getenv(slurmHetSize) != "":
		return s, 0, &topology.VarError{Var: slurmHetSize, Value: getenv(slurmHetSize),
			Msg: "a heterogeneous job's allocation has no single shape: run batchkit env in its step (srun --het-group=...)"}
	case !ok:
		return s, 0, &topology.IncompleteError{Launcher: l.launcher, Have: p.markerVar, HaveValue: p.marker, MissingAny: l.tasksPerNode}
	}
	s = s.ForStep(p.size)
	if err := s.Check(p.size, topology.Value{}, p.numNodes); err != nil {
		return s, 0, err
	}
	// Rank 0 runs on the first node, so it must hold a task.
	if s.Counts[0] < 1 {
		return s, 0, &topology.VarError{Var: s.Var, Value: s.Raw, Msg: "the first node has no tasks: a node of a job holds at least 1"}
	}
	return s, 0, nil
}

// oneLine keeps an error that quotes a path or a file one line.
func oneLine(err error) string {
	return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(err.Error())
}
