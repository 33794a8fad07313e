package health

import (
	"os"
	"slices"

	"github.com/batchkit/batchkit/envsetup"
)

// Here is where this process runs: the machine's hostname (not the
// launcher's node name: the two nodes of a test cluster may be one
// machine) and the CPUs it may run on (its affinity mask; nil when
// unknown).
func Here() (host string, cpus []int) {
	host, _ = os.Hostname()
	if set, err := envsetup.ReadCPUs("/"); err == nil {
		for _, c := range set.Allowed {
			cpus = append(cpus, c.ID)
		}
	}
	return host, cpus
}

// Crowded is a machine with more ranks than CPUs to run them on: its ranks
// wait for a CPU at every step, some more than others, and their times say
// nothing of the hardware (MPICH's ranks, which poll, measured links of 31
// and 36 % of the third's on this 2-CPU machine).
type Crowded struct {
	Host  string `json:"host"`
	Ranks []int  `json:"ranks"`
	CPUs  int    `json:"cpus"` // the union of the ranks' affinity masks
}

// crowded are the machines of s with more ranks than CPUs, in order of
// their first rank; a machine whose CPUs are unknown is not counted.
func crowded(s []Sample) []Crowded {
	var out []Crowded
	at := map[string]int{}
	cpus := map[string][]int{}
	for _, x := range s {
		i, ok := at[x.Host]
		if !ok {
			i, at[x.Host] = len(out), len(out)
			out = append(out, Crowded{Host: x.Host})
		}
		out[i].Ranks = append(out[i].Ranks, x.Rank)
		for _, c := range x.CPUs {
			if !slices.Contains(cpus[x.Host], c) {
				cpus[x.Host] = append(cpus[x.Host], c)
			}
		}
	}
	kept := []Crowded{} // [] in JSON, as the outliers
	for _, c := range out {
		if c.CPUs = len(cpus[c.Host]); c.CPUs > 0 && len(c.Ranks) > c.CPUs {
			kept = append(kept, c)
		}
	}
	return kept
}
