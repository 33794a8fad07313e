package envsetup

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/topology"
)

// flat is n cores of one thread each on one socket, CPUs first..first+n-1.
func flat(first, n, online int) CPUSet {
	s := CPUSet{Online: online}
	for i := first; i < first+n; i++ {
		s.Allowed = append(s.Allowed, CPU{ID: i, Core: i})
	}
	return s
}

// ht is sockets x coresPer cores of 2 threads, numbered as Linux does on
// Intel: the first threads of every core 0..N-1, their siblings N..2N-1.
func ht(sockets, coresPer int) CPUSet {
	n := sockets * coresPer
	s := CPUSet{Online: 2 * n}
	for id := range 2 * n {
		p := id % n
		s.Allowed = append(s.Allowed, CPU{ID: id, Core: p % coresPer, Socket: p / coresPer})
	}
	return s
}

func topo(l topology.Launcher, localRank, localSize int) topology.Topology {
	return topology.Topology{Launcher: l, Rank: localRank, WorldSize: localSize, LocalRank: localRank,
		LocalWorldSize: localSize, NumNodes: 1, MasterAddr: "127.0.0.1", MasterPort: 29500}
}

// base is what every non-Hydra rank gets besides the core-dependent values.
func base(localRank, localSize string, atl string, extra map[string]string) map[string]string {
	m := map[string]string{
		"CCL_WORKER_COUNT": "1", "KMP_BLOCKTIME": "1", "CCL_ATL_TRANSPORT": atl,
		"CCL_PROCESS_LAUNCHER": "none", "CCL_LOCAL_RANK": localRank, "CCL_LOCAL_SIZE": localSize,
	}
	for k, v := range extra {
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

func TestPinning(t *testing.T) {
	for _, tc := range []struct {
		name     string
		topo     topology.Topology
		cpus     CPUSet
		opts     PinOptions
		env      map[string]string
		want     map[string]string
		warnings []string
	}{{
		name: "one rank, 4 cores: 3 compute, worker on the last",
		topo: topo(topology.Single, 0, 1), cpus: flat(0, 4, 4),
		want: base("0", "1", "ofi", map[string]string{"OMP_NUM_THREADS": "3",
			"OMP_PLACES": "{0},{1},{2}", "OMP_PROC_BIND": "close", "CCL_WORKER_AFFINITY": "3"}),
	}, {
		name: "batchkit run, 2 ranks share 8 cores: local rank 1 takes 4-7",
		topo: topo(topology.Torchrun, 1, 2), cpus: flat(0, 8, 8),
		want: base("1", "2", "ofi", map[string]string{"OMP_NUM_THREADS": "3",
			"OMP_PLACES": "{4},{5},{6}", "OMP_PROC_BIND": "close",
			"CCL_WORKER_AFFINITY": "3,7", "I_MPI_PIN_DOMAIN": "[F,F0]"}),
	}, {
		name: "srun without PMI, 4 ranks on 64 cores: local rank 2",
		topo: topo(topology.Slurm, 2, 4), cpus: flat(0, 64, 64),
		env: map[string]string{"SLURM_STEP_ID": "0"},
		want: base("2", "4", "ofi", map[string]string{"OMP_NUM_THREADS": "15",
			"OMP_PLACES": "{32},{33},{34},{35},{36},{37},{38},{39},{40},{41},{42},{43},{44},{45},{46}", "OMP_PROC_BIND": "close",
			"CCL_WORKER_AFFINITY": "15,31,47,63",
			"I_MPI_PIN_DOMAIN":    "[FFFF,FFFF0000,FFFF00000000,FFFF000000000000]"}),
	}, {
		name: "srun --mpi=pmi2 --cpus-per-task 2 on a whole 8-core node: 2 cores each, OFI transport (oneCCL's MPI transport works only under Intel MPI's mpiexec)",
		topo: topo(topology.Slurm, 0, 2), cpus: flat(0, 8, 8),
		env: map[string]string{"SLURM_STEP_ID": "0", "SLURM_CPUS_PER_TASK": "2", "PMI_RANK": "0", "PMI_SIZE": "2"},
		want: base("0", "2", "ofi", map[string]string{"OMP_NUM_THREADS": "1",
			"OMP_PLACES": "{0}", "OMP_PROC_BIND": "close",
			"CCL_WORKER_AFFINITY": "1,3", "I_MPI_PIN_DOMAIN": "[3,C]"}),
	}, {
		name: "srun --cpu-bind: the mask is this task's 2 CPUs (SLURM_CPUS_PER_TASK=2)",
		topo: topo(topology.Slurm, 1, 2), cpus: flat(2, 2, 8),
		env: map[string]string{"SLURM_STEP_ID": "0", "SLURM_CPUS_PER_TASK": "2"},
		want: base("1", "2", "ofi", map[string]string{"OMP_NUM_THREADS": "1",
			"OMP_PLACES": "{2}", "OMP_PROC_BIND": "close", "CCL_WORKER_AFFINITY": "3,3"}),
	}, {
		name: "srun -n2 -c2 on a node that declares 4 CPUs but has 2: the whole node's mask is shared",
		topo: topo(topology.Slurm, 1, 2), cpus: flat(0, 2, 2),
		env: map[string]string{"SLURM_STEP_ID": "0", "SLURM_CPUS_PER_TASK": "2"},
		want: base("1", "2", "ofi", map[string]string{"OMP_NUM_THREADS": "1",
			"OMP_PLACES": "{1}", "OMP_PROC_BIND": "close",
			"CCL_WORKER_AFFINITY": "0,1", "I_MPI_PIN_DOMAIN": "[1,2]", "CCL_WORKER_OFFLOAD": "0"}),
		warnings: []string{"pinning: 1 core(s) per rank for 1 oneCCL worker(s): the workers share cores with compute"},
	}, {
		name: "srun --cpu-bind=cores: SLURM_CPU_BIND_TYPE says the mask is the task's",
		topo: topo(topology.Slurm, 1, 2), cpus: flat(4, 4, 8),
		env: map[string]string{"SLURM_STEP_ID": "0", "SLURM_CPU_BIND_TYPE": "mask_cpu:"},
		want: base("1", "2", "ofi", map[string]string{"OMP_NUM_THREADS": "3",
			"OMP_PLACES": "{4},{5},{6}", "OMP_PROC_BIND": "close", "CCL_WORKER_AFFINITY": "7,7"}),
	}, {
		name: "a job cgroup narrower than the node is shared by its tasks: divided",
		topo: topo(topology.Slurm, 0, 2), cpus: flat(4, 4, 16),
		env: map[string]string{"SLURM_STEP_ID": "0"},
		want: base("0", "2", "ofi", map[string]string{"OMP_NUM_THREADS": "1",
			"OMP_PLACES": "{4}", "OMP_PROC_BIND": "close",
			"CCL_WORKER_AFFINITY": "5,7", "I_MPI_PIN_DOMAIN": "[30,C0]"}),
	}, {
		name: "hyperthreads, 2 sockets x 4 cores: one thread per physical core, a socket per rank",
		topo: topo(topology.Torchrun, 1, 2), cpus: ht(2, 4),
		want: base("1", "2", "ofi", map[string]string{"OMP_NUM_THREADS": "3",
			"OMP_PLACES": "{4},{5},{6}", "OMP_PROC_BIND": "close",
			"CCL_WORKER_AFFINITY": "3,7", "I_MPI_PIN_DOMAIN": "[F0F,F0F0]"}),
	}, {
		name: "hyperthreads and SLURM_CPUS_PER_TASK=4: 4 threads are 2 cores",
		topo: topo(topology.Slurm, 1, 2), cpus: ht(1, 8),
		env: map[string]string{"SLURM_STEP_ID": "0", "SLURM_CPUS_PER_TASK": "4"},
		want: base("1", "2", "ofi", map[string]string{"OMP_NUM_THREADS": "1",
			"OMP_PLACES": "{2}", "OMP_PROC_BIND": "close",
			"CCL_WORKER_AFFINITY": "1,3", "I_MPI_PIN_DOMAIN": "[303,C0C]"}),
	}, {
		name: "Intel MPI Hydra pinned the rank: its own mask, hydra launcher, no I_MPI_PIN_DOMAIN",
		topo: topo(topology.Hydra, 1, 2), cpus: flat(2, 2, 4),
		env: map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"},
		want: map[string]string{"CCL_WORKER_COUNT": "1", "KMP_BLOCKTIME": "1", "CCL_ATL_TRANSPORT": "ofi",
			"CCL_PROCESS_LAUNCHER": "hydra", "OMP_NUM_THREADS": "1",
			"OMP_PLACES": "{2}", "OMP_PROC_BIND": "close", "CCL_WORKER_AFFINITY": "3,3"},
	}, {
		name: "Open MPI without binding: the node's mask is divided",
		topo: topo(topology.OpenMPI, 0, 2), cpus: flat(0, 4, 4),
		want: base("0", "2", "ofi", map[string]string{"OMP_NUM_THREADS": "1",
			"OMP_PLACES": "{0}", "OMP_PROC_BIND": "close",
			"CCL_WORKER_AFFINITY": "1,3", "I_MPI_PIN_DOMAIN": "[3,C]"}),
	}, {
		name: "the user's OMP_NUM_THREADS wins; CCL_WORKER_COUNT=2 from the profile is the worker count",
		topo: topo(topology.Torchrun, 0, 2), cpus: flat(0, 8, 8),
		env: map[string]string{"OMP_NUM_THREADS": "8", "CCL_WORKER_COUNT": "2", "KMP_BLOCKTIME": "1"},
		want: base("0", "2", "ofi", map[string]string{"CCL_WORKER_COUNT": "", "KMP_BLOCKTIME": "",
			"OMP_PLACES": "{0},{1}", "OMP_PROC_BIND": "close",
			"CCL_WORKER_AFFINITY": "2,3,6,7", "I_MPI_PIN_DOMAIN": "[F,F0]"}),
		warnings: []string{"pinning: keeping OMP_NUM_THREADS=8 from the environment (batchkit computed 2)"},
	}, {
		name: "PinOptions.Workers=2 when the environment has none",
		topo: topo(topology.Torchrun, 1, 2), cpus: flat(0, 8, 8), opts: PinOptions{Workers: 2},
		want: base("1", "2", "ofi", map[string]string{"CCL_WORKER_COUNT": "2", "OMP_NUM_THREADS": "2",
			"OMP_PLACES": "{4},{5}", "OMP_PROC_BIND": "close",
			"CCL_WORKER_AFFINITY": "2,3,6,7", "I_MPI_PIN_DOMAIN": "[F,F0]"}),
	}, {
		name: "a bad CCL_WORKER_COUNT is kept, and computed for 1 worker",
		topo: topo(topology.Single, 0, 1), cpus: flat(0, 2, 2),
		env: map[string]string{"CCL_WORKER_COUNT": "many"},
		want: base("0", "1", "ofi", map[string]string{"CCL_WORKER_COUNT": "", "OMP_NUM_THREADS": "1",
			"OMP_PLACES": "{0}", "OMP_PROC_BIND": "close", "CCL_WORKER_AFFINITY": "1"}),
		warnings: []string{`pinning: CCL_WORKER_COUNT="many" is not a positive number: computing for 1 worker(s)`},
	}, {
		name: "one core per rank: the worker shares it",
		topo: topo(topology.Torchrun, 1, 2), cpus: flat(0, 2, 2),
		want: base("1", "2", "ofi", map[string]string{"OMP_NUM_THREADS": "1",
			"OMP_PLACES": "{1}", "OMP_PROC_BIND": "close",
			"CCL_WORKER_AFFINITY": "0,1", "I_MPI_PIN_DOMAIN": "[1,2]", "CCL_WORKER_OFFLOAD": "0"}),
		warnings: []string{"pinning: 1 core(s) per rank for 1 oneCCL worker(s): the workers share cores with compute"},
	}, {
		name: "more ranks than cores: oversubscribed, no pinning",
		topo: topo(topology.Torchrun, 3, 4), cpus: flat(0, 2, 2),
		want:     base("3", "4", "ofi", map[string]string{"OMP_NUM_THREADS": "1", "CCL_WORKER_OFFLOAD": "0"}),
		warnings: []string{"pinning: 4 local ranks on 2 cores: oversubscribed, OMP_NUM_THREADS=1 and no core pinning"},
	}, {
		name: "hyperthreads, srun bound the rank to 3 cores and their siblings: a place per core, its lowest thread",
		topo: topo(topology.Slurm, 1, 2), cpus: CPUSet{Online: 16, Allowed: []CPU{
			{ID: 2, Core: 2}, {ID: 3, Core: 3}, {ID: 4, Core: 4}, {ID: 10, Core: 2}, {ID: 11, Core: 3}, {ID: 12, Core: 4}}},
		env: map[string]string{"SLURM_STEP_ID": "0", "SLURM_CPU_BIND_TYPE": "mask_cpu:"},
		want: base("1", "2", "ofi", map[string]string{"OMP_NUM_THREADS": "2",
			"OMP_PLACES": "{2},{3}", "OMP_PROC_BIND": "close", "CCL_WORKER_AFFINITY": "4,4"}),
	}, {
		name: "hyperthreads, 4 ranks on 2 cores of 2 threads: oversubscribed, no places",
		topo: topo(topology.Torchrun, 0, 4), cpus: ht(1, 2),
		want:     base("0", "4", "ofi", map[string]string{"OMP_NUM_THREADS": "1", "CCL_WORKER_OFFLOAD": "0"}),
		warnings: []string{"pinning: 4 local ranks on 2 cores: oversubscribed, OMP_NUM_THREADS=1 and no core pinning"},
	}, {
		name: "a user's KMP_AFFINITY with a type: Intel OpenMP would ignore OMP_PLACES and OMP_PROC_BIND, so neither is set",
		topo: topo(topology.Torchrun, 1, 2), cpus: flat(0, 8, 8),
		env: map[string]string{"KMP_AFFINITY": "granularity=fine,compact,1,0"},
		want: base("1", "2", "ofi", map[string]string{"OMP_NUM_THREADS": "3",
			"CCL_WORKER_AFFINITY": "3,7", "I_MPI_PIN_DOMAIN": "[F,F0]"}),
		warnings: []string{"pinning: keeping KMP_AFFINITY=granularity=fine,compact,1,0 from the environment: OMP_PLACES and OMP_PROC_BIND not set (Intel OpenMP would ignore them with a warning; GNU OpenMP threads stay unpinned)"},
	}, {
		name: "a user's GOMP_CPU_AFFINITY also outranks OMP_PLACES in Intel OpenMP: neither is set",
		topo: topo(topology.Single, 0, 1), cpus: flat(0, 4, 4),
		env:      map[string]string{"GOMP_CPU_AFFINITY": "0-2"},
		want:     base("0", "1", "ofi", map[string]string{"OMP_NUM_THREADS": "3", "CCL_WORKER_AFFINITY": "3"}),
		warnings: []string{"pinning: keeping GOMP_CPU_AFFINITY=0-2 from the environment: OMP_PLACES and OMP_PROC_BIND not set (Intel OpenMP would ignore them with a warning; GNU OpenMP threads stay unpinned)"},
	}, {
		name: "KMP_AFFINITY=verbose names no type and rivals nothing: places set, no warning",
		topo: topo(topology.Single, 0, 1), cpus: flat(0, 4, 4),
		env: map[string]string{"KMP_AFFINITY": "verbose"},
		want: base("0", "1", "ofi", map[string]string{"OMP_NUM_THREADS": "3",
			"OMP_PLACES": "{0},{1},{2}", "OMP_PROC_BIND": "close", "CCL_WORKER_AFFINITY": "3"}),
	}, {
		name: "the user's OMP_PROC_BIND and OMP_PLACES win, each with a warning",
		topo: topo(topology.Torchrun, 0, 2), cpus: flat(0, 8, 8),
		env: map[string]string{"OMP_PROC_BIND": "spread", "OMP_PLACES": "cores"},
		want: base("0", "2", "ofi", map[string]string{"OMP_NUM_THREADS": "3",
			"CCL_WORKER_AFFINITY": "3,7", "I_MPI_PIN_DOMAIN": "[F,F0]"}),
		warnings: []string{
			"pinning: keeping OMP_PLACES=cores from the environment (batchkit computed {0},{1},{2})",
			"pinning: keeping OMP_PROC_BIND=spread from the environment (batchkit computed close)"},
	}, {
		name: "a user's OMP_PROC_BIND=close equal to the computed one: kept silently, places still set",
		topo: topo(topology.Single, 0, 1), cpus: flat(0, 2, 2),
		env: map[string]string{"OMP_PROC_BIND": "close"},
		want: base("0", "1", "ofi", map[string]string{"OMP_NUM_THREADS": "1",
			"OMP_PLACES": "{0}", "CCL_WORKER_AFFINITY": "1"}),
	}, {
		name: "a user's CCL_PROCESS_LAUNCHER=hydra under batchkit run is kept, with a warning",
		topo: topo(topology.Single, 0, 1), cpus: flat(0, 2, 2),
		env: map[string]string{"CCL_PROCESS_LAUNCHER": "hydra"},
		want: base("0", "1", "ofi", map[string]string{"CCL_PROCESS_LAUNCHER": "", "OMP_NUM_THREADS": "1",
			"OMP_PLACES": "{0}", "OMP_PROC_BIND": "close", "CCL_WORKER_AFFINITY": "1"}),
		warnings: []string{"pinning: keeping CCL_PROCESS_LAUNCHER=hydra from the environment (batchkit computed none)"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			set, warnings := Pinning(tc.topo, tc.cpus, tc.opts, topology.MapEnv(tc.env))
			if d := cmp.Diff(tc.want, set); d != "" {
				t.Errorf("set (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.warnings, warnings); d != "" {
				t.Errorf("warnings (-want +got):\n%s", d)
			}
		})
	}
}
