package tcp

import "slices"

// Which ranks a rank links to. A full mesh (n-1 connections per rank, as
// gloo builds) did not form at 512 ranks on one host: 130,816 connections,
// dials timing out. So a rank connects only to the ranks its algorithms
// exchange data with, O(log n) of them: one row per algorithm, and a rank's
// links are the union of the rows (meshPeers), which the rendezvous forms.
// An algorithm that talks to a rank outside its row finds no link there:
// add the rank to the row.

// algorithm is one row: the ranks rank r talks to in a world of n.
type algorithm struct {
	name  string
	peers func(r, n int) []int
}

var algorithms = []algorithm{
	{"ring: allreduce, allgather and reduce-scatter; the broadcast chain", ringPeers},
	{"recursive doubling: allreduce", func(r, n int) []int { return newRDPlan(r, n).peers() }},
	// In the virtual ranks of any root, a rank's parent and children are
	// at power-of-two distances.
	{"binomial tree: broadcast, any root", powerOfTwoPeers},
	{"dissemination: barrier", powerOfTwoPeers},
}

// meshPeers is every rank that r links to, sorted: the union of the rows.
// It is symmetric (r links to s exactly when s links to r), which the
// rendezvous relies on: the lower rank of a link accepts, the higher dials.
func meshPeers(r, n int) []int {
	var all []int
	for _, a := range algorithms {
		all = append(all, a.peers(r, n)...)
	}
	slices.Sort(all)
	return slices.DeleteFunc(slices.Compact(all), func(p int) bool { return p == r })
}

// ringPeers are r's ring neighbours.
func ringPeers(r, n int) []int { return []int{mod(r+1, n), mod(r-1, n)} }

// powerOfTwoPeers are the ranks at a distance of 1, 2, 4 … < n either way.
func powerOfTwoPeers(r, n int) []int {
	var ps []int
	for d := 1; d < n; d <<= 1 {
		ps = append(ps, mod(r+d, n), mod(r-d, n))
	}
	return ps
}

// rdPlan is recursive doubling (allreduceRD) from one rank's side, made
// once per backend. For n not a power of two the first 2·rem ranks fold in
// pairs first: the even one hands its data to the odd one (its fold) and
// gets the result back at the end; the others run the steps.
type rdPlan struct {
	handsOff bool // an even rank of a folded pair: it takes no steps
	fold     int  // the other rank of its pair, -1 if not folded
	steps    []rdStep
}

// rdStep: exchange partials with peer; mineFirst: this rank's partial is
// the left operand (it has the lower virtual rank), so that both partners
// compute the same bits.
type rdStep struct {
	peer      int
	mineFirst bool
}

func newRDPlan(r, n int) rdPlan {
	pow := 1
	for pow*2 <= n {
		pow *= 2
	}
	rem := n - pow
	pl := rdPlan{fold: -1}
	vr := r - rem // virtual rank among the pow ranks that take steps
	if r < 2*rem {
		if r%2 == 0 {
			return rdPlan{handsOff: true, fold: r + 1}
		}
		pl.fold, vr = r-1, r/2
	}
	for mask := 1; mask < pow; mask <<= 1 {
		vp := vr ^ mask
		pr := vp + rem
		if vp < rem {
			pr = 2*vp + 1
		}
		pl.steps = append(pl.steps, rdStep{peer: pr, mineFirst: vr < vp})
	}
	return pl
}

func (pl rdPlan) peers() []int {
	var ps []int
	if pl.fold >= 0 {
		ps = append(ps, pl.fold)
	}
	for _, s := range pl.steps {
		ps = append(ps, s.peer)
	}
	return ps
}
