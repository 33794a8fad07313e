package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchkit/batchkit/envsetup"
)

// pinVars is what each rank prints: its local rank, its affinity mask and
// the variables exec --pin set (KMP_AFFINITY must stay unset: Intel OpenMP
// would ignore OMP_PLACES and OMP_PROC_BIND next to it).
const pinVars = `echo "PIN $LOCAL_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2) $OMP_NUM_THREADS $OMP_PLACES $OMP_PROC_BIND KMP_AFFINITY=${KMP_AFFINITY-unset} $CCL_WORKER_AFFINITY $I_MPI_PIN_DOMAIN $CCL_PROCESS_LAUNCHER $CCL_LOCAL_RANK $CCL_LOCAL_SIZE $CCL_ATL_TRANSPORT $KMP_BLOCKTIME"`

// hostCores is this machine's physical cores (first hardware thread of
// each), read independently of envsetup's grouping, ordered by socket then
// number.
func hostCores(t *testing.T) []int {
	t.Helper()
	cpus, err := envsetup.ReadCPUs("/")
	if err != nil {
		t.Skip(err)
	}
	type key struct{ s, c int }
	first := map[key]envsetup.CPU{}
	for _, c := range cpus.Allowed {
		k := key{c.Socket, c.Core}
		if f, ok := first[k]; !ok || c.ID < f.ID {
			first[k] = c
		}
	}
	var cores []envsetup.CPU
	for _, c := range first {
		cores = append(cores, c)
	}
	sort.Slice(cores, func(i, j int) bool {
		if cores[i].Socket != cores[j].Socket {
			return cores[i].Socket < cores[j].Socket
		}
		return cores[i].ID < cores[j].ID
	})
	ids := make([]int, len(cores))
	for i, c := range cores {
		ids[i] = c.ID
	}
	if len(ids) < 2 {
		t.Skipf("%d core(s): two ranks cannot get a core each", len(ids))
	}
	return ids
}

// wantPinned is the line local rank r of 2 should print on this machine:
// half the cores each, the last of a rank's half for its oneCCL worker
// (sharing its only core when it has one), under a non-MPI launcher.
func wantPinned(cores []int, r int, mask string) string {
	per := len(cores) / 2
	compute := computeCores(cores, r)
	var places []string
	for _, c := range compute {
		places = append(places, "{"+strconv.Itoa(c)+"}")
	}
	var workers []string
	for j := range 2 {
		workers = append(workers, strconv.Itoa(cores[j*per+per-1]))
	}
	return fmt.Sprintf("PIN %d %s %d %s close KMP_AFFINITY=unset %s [%s] none %d 2 ofi 1",
		r, mask, len(compute), strings.Join(places, ","), strings.Join(workers, ","), domains(cores, per), r)
}

// computeCores is local rank r of 2's OpenMP cores: its half of the cores
// but the last (its oneCCL worker's), or its only core.
func computeCores(cores []int, r int) []int {
	per := len(cores) / 2
	return cores[r*per : r*per+max(1, per-1)]
}

// domains is I_MPI_PIN_DOMAIN's masks for two ranks of per cores, assuming
// one thread per core (checked by the caller through the mask's size).
func domains(cores []int, per int) string {
	var masks []string
	for j := range 2 {
		var m uint64
		for _, id := range cores[j*per : (j+1)*per] {
			m |= 1 << id
		}
		masks = append(masks, strings.ToUpper(strconv.FormatUint(m, 16)))
	}
	return strings.Join(masks, ",")
}

// pinLines picks the PIN lines out of out, by local rank.
func pinLines(t *testing.T, out string) map[int]string {
	t.Helper()
	got := map[int]string{}
	for _, line := range strings.Split(out, "\n") {
		_, rest, ok := strings.Cut(line, "PIN ")
		if !ok {
			continue
		}
		rest = "PIN " + rest
		r, err := strconv.Atoi(strings.Fields(rest)[1])
		if err != nil {
			t.Fatalf("bad line %q", line)
		}
		got[r] = strings.TrimSpace(rest)
	}
	return got
}

func checkPinned(t *testing.T, out string) {
	t.Helper()
	cores := hostCores(t)
	cpus, _ := envsetup.ReadCPUs("/")
	if len(cpus.Allowed) != len(cores) || cores[len(cores)-1] >= 64 {
		t.Skip("hyperthreads or more than 64 CPUs: the expected masks here assume neither")
	}
	mask := cpuRanges(t)
	got := pinLines(t, out)
	for r := range 2 {
		if want := wantPinned(cores, r, mask); got[r] != want {
			t.Errorf("local rank %d:\n got %q\nwant %q\n(output:\n%s)", r, got[r], want, out)
		}
	}
}

// cpuRanges is this process's Cpus_allowed_list: the ranks inherit it.
func cpuRanges(t *testing.T) string {
	t.Helper()
	out := run(t, 10*time.Second, "sh", "-c", "grep Cpus_allowed_list /proc/self/status | cut -f2")
	return strings.TrimSpace(out)
}

// batchkit run starts 2 local ranks sharing this machine's cores: exec
// --pin gives each half of them, oneCCL's launcher none with its local
// rank, and the OFI transport.
func TestPinUnderRun(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	out := run(t, time.Minute, bin, "run", "-n", "2", "--", bin, "exec", "--pin", "--", "sh", "-c", pinVars)
	checkPinned(t, out)
	t.Run("libgomp", func(t *testing.T) {
		prog := buildOMPWhere(t)
		checkGOMP(t, run(t, time.Minute, bin, "run", "-n", "2", "--", bin, "exec", "--pin", "--", prog))
	})
}

// srun -n2 -c2 without PMI on one node of the local cluster: the nodes
// declare 4 CPUs but share this machine's, so each task's mask is the
// whole machine and exec --pin divides it like under batchkit run.
func TestPinUnderSrun(t *testing.T) {
	needCluster(t)
	out := run(t, 2*time.Minute, "srun", "-N1", "-n2", "--cpus-per-task", "2", "--mpi=none",
		bin, "exec", "--pin", "--", "sh", "-c", pinVars)
	checkPinned(t, out)
	t.Run("libgomp", func(t *testing.T) {
		prog := buildOMPWhere(t)
		checkGOMP(t, run(t, 2*time.Minute, "srun", "-N1", "-n2", "--cpus-per-task", "2", "--mpi=none",
			bin, "exec", "--pin", "--", prog))
	})
}

// ompWhereC is an OpenMP program: each thread of one parallel region prints
// its local rank, thread number, the CPU it runs on, its affinity mask, the
// binding policy (omp_proc_bind_close is 3) and the number of places, as
// GNU OpenMP applied them.
const ompWhereC = `#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
	const char *r = getenv("LOCAL_RANK");
	#pragma omp parallel
	{
		cpu_set_t set; char mask[4096] = ""; int n = 0;
		sched_getaffinity(0, sizeof set, &set);
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &set)) n += snprintf(mask + n, sizeof mask - n, n ? ",%d" : "%d", c);
		#pragma omp critical
		printf("GOMP %s %d %d %s %d %d\n", r ? r : "-", omp_get_thread_num(), sched_getcpu(), mask,
			(int)omp_get_proc_bind(), omp_get_num_places());
	}
	return 0;
}
`

// buildOMPWhere compiles ompWhereC with gcc's libgomp into a directory the
// cluster's nodes (this host) can read; without gcc the check is skipped.
func buildOMPWhere(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: not checking that GNU OpenMP honours OMP_PLACES and OMP_PROC_BIND (install gcc, whose libgomp this uses)")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	src, prog := filepath.Join(dir, "omp_where.c"), filepath.Join(dir, "omp_where")
	if err := os.WriteFile(src, []byte(ompWhereC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-fopenmp", "-o", prog, src).CombinedOutput(); err != nil {
		t.Skipf("gcc -fopenmp failed, not checking libgomp: %v\n%s", err, out)
	}
	return prog
}

// checkGOMP checks that libgomp put thread i of local rank r on its i-th
// compute core alone (mask and CPU), with the close policy over one place
// per compute core. Without OMP_PLACES each thread's mask would be the
// whole machine's.
func checkGOMP(t *testing.T, out string) {
	t.Helper()
	cores := hostCores(t)
	cpus, _ := envsetup.ReadCPUs("/")
	if len(cpus.Allowed) != len(cores) {
		t.Skip("hyperthreads: the expected places here assume one thread per core")
	}
	got := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if _, rest, ok := strings.Cut(line, "GOMP "); ok { // batchkit run prefixes "[r] "
			got["GOMP "+strings.TrimSpace(rest)] = true
		}
	}
	var want []string
	for r := range 2 {
		compute := computeCores(cores, r)
		for i, c := range compute {
			want = append(want, fmt.Sprintf("GOMP %d %d %d %d 3 %d", r, i, c, c, len(compute)))
		}
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("missing %q\n(output:\n%s)", w, out)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d thread lines, want %d:\n%s", len(got), len(want), out)
	}
}
