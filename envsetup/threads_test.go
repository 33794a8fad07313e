package envsetup

import (
	"testing"

	"github.com/batchkit/batchkit/topology"
)

func TestThreadsWarning(t *testing.T) {
	cpus := func(ids ...int) CPUSet {
		s := CPUSet{Online: 8}
		for _, id := range ids {
			s.Allowed = append(s.Allowed, CPU{ID: id, Core: id})
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		threads string
		cpus    CPUSet
		want    string
	}{
		{"bound to one core, 8 threads (the site-admin example's first binding)", "8", cpus(3),
			"OMP_NUM_THREADS=8, but this rank is bound to 1 CPU(s) (3): its threads will share them; give each rank 8 cores (Open MPI: PE=8 in --map-by; srun: --cpus-per-task=8), leave it unbound (--bind-to none) or set OMP_NUM_THREADS=1"},
		{"nested levels: the first counts", "4,2", cpus(0, 1),
			"OMP_NUM_THREADS=4,2, but this rank is bound to 2 CPU(s) (0,1): its threads will share them; give each rank 4 cores (Open MPI: PE=4 in --map-by; srun: --cpus-per-task=4), leave it unbound (--bind-to none) or set OMP_NUM_THREADS=2"},
		{"as many threads as CPUs", "4", cpus(0, 1, 2, 3), ""},
		{"fewer", "2", cpus(0, 1, 2, 3), ""},
		{"unset", "", cpus(0), ""},
		{"not a number", "all", cpus(0), ""},
		{"no mask read", "8", CPUSet{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := topology.MapEnv(map[string]string{"OMP_NUM_THREADS": tc.threads})
			if got := ThreadsWarning(getenv, tc.cpus); got != tc.want {
				t.Errorf("ThreadsWarning(%q) =\n%q\nwant\n%q", tc.threads, got, tc.want)
			}
		})
	}
}
