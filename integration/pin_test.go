package integration

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchkit/batchkit/envsetup"
)

// pinVars is what each rank prints: its local rank, its affinity mask and
// the variables exec --pin set.
const pinVars = `echo "PIN $LOCAL_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2) $OMP_NUM_THREADS $KMP_AFFINITY $CCL_WORKER_AFFINITY $I_MPI_PIN_DOMAIN $CCL_PROCESS_LAUNCHER $CCL_LOCAL_RANK $CCL_LOCAL_SIZE $CCL_ATL_TRANSPORT $KMP_BLOCKTIME"`

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
	slice := cores[r*per : (r+1)*per]
	compute := slice[:max(1, per-1)]
	var workers []string
	for j := range 2 {
		workers = append(workers, strconv.Itoa(cores[j*per+per-1]))
	}
	list := func(ids []int) string {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = strconv.Itoa(id)
		}
		return strings.Join(s, ",")
	}
	return fmt.Sprintf("PIN %d %s %d granularity=fine,proclist=[%s],explicit %s [%s] none %d 2 ofi 1",
		r, mask, len(compute), list(compute), strings.Join(workers, ","), domains(cores, per), r)
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
}

// srun -n2 -c2 without PMI on one node of the local cluster: the nodes
// declare 4 CPUs but share this machine's, so each task's mask is the
// whole machine and exec --pin divides it like under batchkit run.
func TestPinUnderSrun(t *testing.T) {
	needCluster(t)
	out := run(t, 2*time.Minute, "srun", "-N1", "-n2", "--cpus-per-task", "2", "--mpi=none",
		bin, "exec", "--pin", "--", "sh", "-c", pinVars)
	checkPinned(t, out)
}
