package envsetup

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/topology"
)

// PinOptions are the inputs that come from the profile or flags.
type PinOptions struct {
	// Workers is oneCCL's worker threads per rank (CCL_WORKER_COUNT) when the
	// environment does not set it; 0 means 1, oneCCL's default.
	Workers int
}

// Pinning computes the pinning and oneCCL runtime variables for the rank
// at t on a node with cpus (the table below). set holds only what the
// environment (getenv) does not already set; warnings are one line each,
// for the CLI to print.
//
// Cores per rank: with the mask shared by the node's local ranks, its
// physical cores divided by LocalWorldSize (SLURM_CPUS_PER_TASK, converted
// to cores, caps it), and local rank r takes the r-th slice. When the
// launcher already bound this rank to a mask of its own (see ownMask), all
// of that mask's cores are the rank's.
//
// The variables, and why:
//
//	OMP_NUM_THREADS      this rank's compute cores: its cores minus its oneCCL
//	                     workers' cores, at least 1. Without it every rank's
//	                     OpenMP runtime starts one thread per CPU of the node.
//	OMP_PLACES           {c0},{c1},...: one place per compute core, its lowest
//	                     hardware thread (braces even around one number: leaving
//	                     them out is OpenMP 5.1, in libgomp's manual only from
//	                     GCC 12). An explicit list, not "cores": ranks that share
//	                     one affinity mask would all put their threads on the
//	                     same first cores.
//	OMP_PROC_BIND        close: thread i on place i, so one thread per core.
//	                     Both are the OpenMP standard's (OpenMP 4.0+, section
//	                     "Environment Variables"), read by GNU OpenMP (libgomp:
//	                     stock PyTorch wheels, distributions' torch), which
//	                     ignores KMP_AFFINITY, and by Intel OpenMP (libiomp5,
//	                     LLVM libomp), which turns an explicit place list into
//	                     the binding KMP_AFFINITY=granularity=fine,proclist=[...],
//	                     explicit gives (kmp_settings.cpp, __kmp_stg_parse_places).
//	KMP_AFFINITY         never set. Intel OpenMP ranks KMP_AFFINITY above
//	                     OMP_PLACES and OMP_PROC_BIND: with all three set it
//	                     ignores the two, printing a warning for each in every
//	                     rank (kmp_settings.cpp, __kmp_stg_check_rivals), while
//	                     GNU OpenMP would still need them. So a binding the
//	                     environment already sets for Intel OpenMP (KMP_AFFINITY
//	                     naming a type such as explicit or compact, the only form
//	                     that outranks them; or GOMP_CPU_AFFINITY, also ranked
//	                     above them) is the user's explicit choice: OMP_PLACES and
//	                     OMP_PROC_BIND are then not set, with one warning.
//	KMP_BLOCKTIME        1 (ms): OpenMP threads stop spinning soon after a
//	                     parallel region, so they do not steal the cores oneCCL's
//	                     workers and the other ranks need (Intel Extension for
//	                     PyTorch's launcher sets the same).
//	CCL_WORKER_COUNT     oneCCL worker threads per rank: PinOptions.Workers (1);
//	                     a value already in the environment is read, not overridden.
//	CCL_WORKER_AFFINITY  the workers' cores, disjoint from the compute cores: the
//	                     last cores of each rank's slice, as "auto" does under
//	                     Intel MPI. oneCCL reads it as a list for *all local
//	                     workers* (local rank r's are entries r*W..r*W+W-1, oneCCL
//	                     env.cpp env_2_worker_affinity; Developer Guide, "Execution
//	                     of Communication Operations"). Outside Intel MPI "auto"
//	                     means the last cores of the node, for every rank: on top
//	                     of the last rank's compute threads.
//	I_MPI_PIN_DOMAIN     [m0,m1,...]: one hex mask per local rank, each rank's slice
//	                     (compute and worker cores, hyperthreads included); Intel
//	                     MPI Developer Reference, "Interoperability with OpenMP
//	                     API", explicit <masklist> form. Intel MPI binds local rank
//	                     i to mask i. Its launcher (Hydra) applies it before this
//	                     process exists, so it is never set under Hydra (the value
//	                     given to mpirun governs there) and only set when every
//	                     local rank computes the same list: for Intel MPI ranks
//	                     that pin themselves at MPI_Init (srun --mpi=pmi2, a
//	                     singleton). Left alone when the launcher already bound
//	                     this rank to its own mask.
//	CCL_ATL_TRANSPORT    ofi, under every launcher: the ranks meet through the
//	                     KVS whose address the framework hands round (batchkit's
//	                     rendezvous, torch's store). Checked against oneCCL
//	                     2021.16 with Intel MPI 2021.18: mpi works only under
//	                     Intel MPI's own mpiexec (under Open MPI's mpirun its
//	                     MPI_Init comes up as singletons and aborts "Duplicate
//	                     ranks in rank array"; under MPICH's mpiexec MPI_Init
//	                     fails in MPIDU_bc_table_create), and oneCCL's custom
//	                     reductions, batchkit's max and min, exist on ofi only.
//	CCL_WORKER_OFFLOAD   0 when a rank has no more cores than workers: a worker
//	                     spinning on the core its rank waits on made an 8-byte
//	                     allreduce of 2 ranks on 2 cores take 22 ms instead of
//	                     13 µs (oneCCL 2021.16; it only turns offload off by
//	                     itself when it computes the workers' affinity).
//	CCL_PROCESS_LAUNCHER hydra under Hydra (oneCCL reads MPI_LOCALRANKID and
//	                     MPI_LOCALNRANKS, which Hydra sets); none everywhere
//	                     else, with CCL_LOCAL_RANK and CCL_LOCAL_SIZE from the
//	                     topology. oneCCL's default, hydra, looks for Hydra's
//	                     variables: under batchkit run, torchrun or srun it does
//	                     not find them, a known cause of hangs at init.
//	                     (Values: hydra, torchrun, pmix, none; pmix only in PMIx
//	                     builds, and torchrun only in recent releases: none works
//	                     in all of them.)
//
// Hyperthreads: one OpenMP thread and one worker per physical core, on its
// lowest-numbered hardware thread; the siblings stay in the rank's
// I_MPI_PIN_DOMAIN mask but get no thread (compute-bound kernels gain little
// from a second thread per core, and Intel's PyTorch launcher uses physical
// cores only by default). A place is that one hardware thread, not the
// core's sibling set: threads stay put as they did under KMP_AFFINITY's
// granularity=fine. A user's OMP_NUM_THREADS above the place count wraps
// around the places (two threads on one hardware thread): set OMP_PLACES too.
//
// A value the environment already has wins, with a warning naming it.
func Pinning(t topology.Topology, cpus CPUSet, opts PinOptions, getenv topology.Getenv) (set map[string]string, warnings []string) {
	want := map[string]string{}
	workers, warnings := workerCount(opts, getenv)
	if getenv("CCL_WORKER_COUNT") == "" {
		want["CCL_WORKER_COUNT"] = strconv.Itoa(workers)
	}
	launcherVars(t, getenv, want)
	want["KMP_BLOCKTIME"] = "1"

	cores := physicalCores(cpus.Allowed)
	local, rank := max(t.LocalWorldSize, 1), t.LocalRank
	own := ownMask(t, cpus, getenv)
	var ranks [][]core // each local rank's cores
	if own {
		ranks = [][]core{cores} // only this rank's: the others' are unknown
		rank = 0
	} else {
		per := len(cores) / local
		if c := cpusPerTaskCores(getenv, cpus.Allowed, len(cores)); c > 0 && c < per {
			per = c
		}
		if per == 0 {
			want["OMP_NUM_THREADS"] = "1"
			want["CCL_WORKER_OFFLOAD"] = "0"
			warnings = append(warnings, fmt.Sprintf(
				"pinning: %d local ranks on %d cores: oversubscribed, OMP_NUM_THREADS=1 and no core pinning", local, len(cores)))
			return keepSet(want, getenv, warnings)
		}
		for j := range local {
			ranks = append(ranks, cores[j*per:(j+1)*per])
		}
	}
	mine := ranks[rank]
	compute, _ := split(mine, workers)
	if len(mine) <= workers {
		warnings = append(warnings, fmt.Sprintf(
			"pinning: %d core(s) per rank for %d oneCCL worker(s): the workers share cores with compute", len(mine), workers))
	}
	maps.Copy(want, workerOffload(len(mine), workers))
	want["OMP_NUM_THREADS"] = strconv.Itoa(len(compute))
	if v, ok := intelBinding(getenv); ok {
		warnings = append(warnings, fmt.Sprintf(
			"pinning: keeping %s from the environment: OMP_PLACES and OMP_PROC_BIND not set (Intel OpenMP would ignore them with a warning; GNU OpenMP threads stay unpinned)", v))
	} else {
		want["OMP_PLACES"] = places(primaries(compute))
		want["OMP_PROC_BIND"] = "close"
	}
	var workerCPUs []int
	for j := range local {
		s := mine // a rank bound to its own mask fills every rank's entries with its own cores
		if !own {
			s = ranks[j]
		}
		_, w := split(s, workers)
		workerCPUs = append(workerCPUs, primaries(w)...)
	}
	want["CCL_WORKER_AFFINITY"] = FormatCPUList(workerCPUs)
	if !own && !t.Launcher.Traits().Pin.AppliesPinDomain {
		masks := make([]string, len(ranks))
		for j, s := range ranks {
			masks[j] = hexMask(threads(s))
		}
		want["I_MPI_PIN_DOMAIN"] = "[" + strings.Join(masks, ",") + "]"
	}
	return keepSet(want, getenv, warnings)
}

// places is an OMP_PLACES explicit list of one hardware thread per place.
func places(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = "{" + strconv.Itoa(id) + "}"
	}
	return strings.Join(s, ",")
}

// intelBinding is the binding the environment sets that Intel OpenMP ranks
// above OMP_PLACES and OMP_PROC_BIND, as NAME=value: KMP_AFFINITY when it
// names an affinity type (libomp's __kmp_env_initialize looks for these
// words anywhere in it; KMP_AFFINITY=verbose alone is no rival), else
// GOMP_CPU_AFFINITY.
func intelBinding(getenv topology.Getenv) (string, bool) {
	if v := getenv("KMP_AFFINITY"); v != "" {
		l := strings.ToLower(v)
		for _, t := range []string{"none", "physical", "logical", "compact", "scatter", "explicit", "balanced", "disabled"} {
			if strings.Contains(l, t) {
				return "KMP_AFFINITY=" + v, true
			}
		}
	}
	if v := getenv("GOMP_CPU_AFFINITY"); v != "" {
		return "GOMP_CPU_AFFINITY=" + v, true
	}
	return "", false
}

// workerCount is CCL_WORKER_COUNT from the environment when it is a
// positive number, else opts.Workers (0: 1).
func workerCount(opts PinOptions, getenv topology.Getenv) (int, []string) {
	def := max(opts.Workers, 1)
	raw := getenv("CCL_WORKER_COUNT")
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(raw))
	if err != nil || n < 1 {
		return def, []string{fmt.Sprintf("pinning: CCL_WORKER_COUNT=%q is not a positive number: computing for %d worker(s)", raw, def)}
	}
	return n, nil
}

// launcherVars sets CCL_ATL_TRANSPORT and oneCCL's process launcher from
// the launcher that started the ranks.
func launcherVars(t topology.Topology, getenv topology.Getenv, want map[string]string) {
	maps.Copy(want, OneCCLLauncher(t))
}

// OneCCLLauncher is oneCCL's transport and process launcher for a rank at
// t (see Pinning): what the ccl backend sets where the environment does
// not, with or without --pin.
func OneCCLLauncher(t topology.Topology) map[string]string {
	if t.Launcher.Traits().Pin.HydraLocalRanks {
		return map[string]string{"CCL_ATL_TRANSPORT": "ofi", "CCL_PROCESS_LAUNCHER": "hydra"}
	}
	return map[string]string{
		"CCL_ATL_TRANSPORT":    "ofi",
		"CCL_PROCESS_LAUNCHER": "none",
		"CCL_LOCAL_RANK":       strconv.Itoa(t.LocalRank),
		"CCL_LOCAL_SIZE":       strconv.Itoa(max(t.LocalWorldSize, 1)),
	}
}

// OneCCLOffload is CCL_WORKER_OFFLOAD for a rank of t on cpus, with the
// environment's worker count (see Pinning): what the ccl backend sets
// where the environment does not.
func OneCCLOffload(t topology.Topology, cpus CPUSet, getenv topology.Getenv) map[string]string {
	workers, _ := workerCount(PinOptions{}, getenv)
	cores := len(physicalCores(cpus.Allowed))
	if !ownMask(t, cpus, getenv) {
		cores /= max(t.LocalWorldSize, 1)
	}
	return workerOffload(cores, workers)
}

// workerOffload turns oneCCL's workers off for a rank with no core to
// spare for them.
func workerOffload(cores, workers int) map[string]string {
	if cores <= workers {
		return map[string]string{"CCL_WORKER_OFFLOAD": "0"}
	}
	return nil
}

// ownMask reports whether this process's affinity mask is its own slice,
// already narrowed for it by its launcher, rather than shared with the
// node's other local ranks: it is alone on the node, or the mask is
// narrower than the node and SLURM_CPUS_PER_TASK says it has no more CPUs
// than one task gets, or srun bound it (SLURM_CPU_BIND_TYPE names a
// binding), or a launcher that binds its ranks started it (its traits
// row: Intel MPI and Open MPI pin their ranks by default). A mask of the
// whole node is shared whatever Slurm says (a node may declare more CPUs
// than it has), and so is a job's cgroup narrower than the node without a
// binding: both are divided.
func ownMask(t topology.Topology, cpus CPUSet, getenv topology.Getenv) bool {
	if t.LocalWorldSize <= 1 {
		return true
	}
	if len(cpus.Allowed) >= cpus.Online {
		return false
	}
	if c, err := strconv.Atoi(getenv("SLURM_CPUS_PER_TASK")); err == nil && c > 0 && len(cpus.Allowed) <= c {
		return true
	}
	if b := getenv("SLURM_CPU_BIND_TYPE"); b != "" && !strings.HasPrefix(b, "none") {
		return true
	}
	return t.Launcher.Traits().Pin.BindsRanks
}

// cpusPerTaskCores converts SLURM_CPUS_PER_TASK to physical cores: Slurm
// counts hardware threads as CPUs when a node has several per core. 0 when
// unset or invalid.
func cpusPerTaskCores(getenv topology.Getenv, allowed []CPU, cores int) int {
	c, err := strconv.Atoi(getenv("SLURM_CPUS_PER_TASK"))
	if err != nil || c < 1 || cores == 0 {
		return 0
	}
	perCore := max(len(allowed)/cores, 1)
	return max(c/perCore, 1)
}

// core is one physical core: its hardware threads in the mask, lowest first.
type core []int

// physicalCores groups the allowed CPUs by (socket, core_id), ordered by
// socket, then by lowest CPU number, so that slices stay within a socket.
func physicalCores(allowed []CPU) []core {
	type key struct{ socket, core int }
	idx := map[key]int{}
	var cores []core
	var socket []int
	for _, c := range allowed {
		k := key{c.Socket, c.Core}
		if i, ok := idx[k]; ok {
			cores[i] = append(cores[i], c.ID)
			continue
		}
		idx[k] = len(cores)
		cores = append(cores, core{c.ID})
		socket = append(socket, c.Socket)
	}
	order := make([]int, len(cores))
	for i := range order {
		order[i] = i
		slices.Sort(cores[i])
	}
	sort.SliceStable(order, func(a, b int) bool {
		if socket[order[a]] != socket[order[b]] {
			return socket[order[a]] < socket[order[b]]
		}
		return cores[order[a]][0] < cores[order[b]][0]
	})
	out := make([]core, len(cores))
	for i, o := range order {
		out[i] = cores[o]
	}
	return out
}

// split divides a rank's cores into compute cores and its workers' cores:
// the last `workers` cores are the workers', the rest compute. With too few
// cores, compute keeps the first core and the workers take the last ones,
// repeating them if need be, so that they stay inside the rank's slice.
func split(s []core, workers int) (compute, worker []core) {
	n := len(s) - workers
	if n < 1 {
		n = 1
	}
	compute = s[:n]
	for i := range workers {
		worker = append(worker, s[max(len(s)-workers, 0)+i%min(workers, len(s))])
	}
	return compute, worker
}

// primaries is each core's first hardware thread.
func primaries(cs []core) []int {
	out := make([]int, len(cs))
	for i, c := range cs {
		out[i] = c[0]
	}
	return out
}

// threads is every hardware thread of the cores.
func threads(cs []core) []int {
	var out []int
	for _, c := range cs {
		out = append(out, c...)
	}
	return out
}

// keepSet drops from want what the environment already sets, warning when
// its value differs from the computed one.
func keepSet(want map[string]string, getenv topology.Getenv, warnings []string) (map[string]string, []string) {
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		have := getenv(k)
		if have == "" {
			continue
		}
		if have != want[k] {
			warnings = append(warnings, fmt.Sprintf("pinning: keeping %s=%s from the environment (batchkit computed %s)", k, have, want[k]))
		}
		delete(want, k)
	}
	return want, warnings
}
