package ccl

// The parts of the ccl backend that need no oneCCL: the errors and the
// environment oneCCL reads at initialisation. Built into every binary so
// that they are unit-tested without cgo.

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/tcp"
)

// ErrNotBuilt: the ccl backend asked of a binary built without oneCCL.
var ErrNotBuilt = errors.New("--backend ccl: this binary was built without oneCCL: build bin/batchkit-ccl with `make build-ccl` (after `make intel-stack`)")

// Options is what New needs besides the process environment.
type Options struct {
	Topology topology.Topology
	Getenv   topology.Getenv
	// CPUs is this process's CPU set (envsetup.ReadCPUs): the worker
	// affinity is checked against it and CCL_WORKER_OFFLOAD decided by it.
	CPUs envsetup.CPUSet
	// Rendezvous is the meeting at MASTER_ADDR:MASTER_PORT (rank, size,
	// token, timeouts, log). Its Timeout bounds every call.
	Rendezvous tcp.Options
}

// Error is a failed oneCCL call: the shim's code and what oneCCL threw,
// with the fix when it is a known setup problem.
type Error struct {
	Call string // "allreduce", "create_communicator"
	Code int    // shim.h's BKCCL_ERR_*
	Msg  string // the exception's text on one line
}

func (e *Error) Error() string {
	msg := e.Msg
	if h := hint(e.Msg); h != "" {
		msg += ": " + h
	}
	return "oneCCL " + e.Call + ": " + msg
}

// hints are the fixes for oneCCL messages a user's setup causes.
var hints = []struct{ text, fix string }{
	{"failed to start worker", "its worker thread could not be pinned to the core CCL_WORKER_AFFINITY gives it (outside this rank's CPU set?): unset CCL_WORKER_AFFINITY, or list cores of the rank's set"},
	{"init transport failed", "oneCCL's OFI transport did not start: check CCL_KVS_IFACE and FI_PROVIDER (rerun with CCL_LOG_LEVEL=info to see why)"},
	{"custom reduction is supported for OFI transport only", "set CCL_ATL_TRANSPORT=ofi"},
}

func hint(msg string) string {
	for _, h := range hints {
		if strings.Contains(msg, h.text) {
			return h.fix
		}
	}
	return ""
}

// oneLine joins oneCCL's multi-line exception text.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// TimeoutError: a call did not return within the timeout, and no rank is
// known to have died.
type TimeoutError struct {
	Call    string
	Timeout string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s did not complete within %s: a rank is stuck or unreachable (raise --timeout if it is only slow)", e.Call, e.Timeout)
}

// Env is what New sets in the environment before oneCCL reads it: the
// transport, process launcher and local rank by envsetup's rules
// (envsetup.OneCCLLauncher), the worker offload for the rank's cores
// (envsetup.OneCCLOffload), and the shm transport when all ranks share one node
// (CCL_ATL_SHM=1), wherever the environment has none. A setting
// that cannot work is a *backend.SetupError with the fix.
func Env(t topology.Topology, cpus envsetup.CPUSet, getenv topology.Getenv) (map[string]string, error) {
	if v := getenv("CCL_ATL_TRANSPORT"); v != "" && v != "ofi" {
		return nil, setupf("CCL_ATL_TRANSPORT=%s: batchkit's ccl backend needs ofi (its ranks meet over batchkit's rendezvous, and its max and min are oneCCL custom reductions, which exist on ofi only; mpi works only under Intel MPI's own mpiexec): unset CCL_ATL_TRANSPORT or set it to ofi", v)
	}
	if err := checkIface(getenv("CCL_KVS_IFACE")); err != nil {
		return nil, err
	}
	if err := checkAffinity(t, cpus, getenv); err != nil {
		return nil, err
	}
	set := map[string]string{}
	for k, v := range envsetup.OneCCLLauncher(t) {
		if getenv(k) == "" {
			set[k] = v
		}
	}
	// Ranks sharing a node talk through libfabric's shm provider rather
	// than its tcp one over loopback: CCL_ATL_SHM=1 (oneCCL's default is
	// 0). At 2 ranks on a 2-core machine, taken turn about with the
	// default, an 8-byte allreduce's best fell from ~28 to ~6 µs, 64 KiB
	// from ~68 to ~36, 4 MiB from ~4.9 to ~1.5 ms (docs/performance.md).
	// One node only: oneCCL groups shm peers by host name, so two nodes of
	// one host (a test cluster, or hosts that share a name) failed with
	// "atl_ofi_prov_update_addr_table: unexpected get results: expected 2,
	// got 4"; across real nodes shm with a network provider is untried here.
	if t.LocalWorldSize > 1 && t.NumNodes == 1 && getenv("CCL_ATL_SHM") == "" {
		set["CCL_ATL_SHM"] = "1"
	}
	if len(cpus.Allowed) > 0 {
		for k, v := range envsetup.OneCCLOffload(t, cpus, getenv) {
			if getenv(k) == "" {
				set[k] = v
			}
		}
	}
	return set, nil
}

func setupf(format string, a ...any) error {
	return &backend.SetupError{Err: fmt.Errorf(format, a...)}
}

// interfaces lists this host's network interfaces (a variable for tests).
var interfaces = func() ([]string, error) {
	ifs, err := net.Interfaces()
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	return names, err
}

// checkIface: oneCCL's KVS binds the interface CCL_KVS_IFACE names; one
// that does not exist makes every rank fail later with "init transport
// failed" and nothing more.
func checkIface(name string) error {
	if name == "" {
		return nil
	}
	names, err := interfaces()
	if err != nil || slices.Contains(names, name) {
		return nil
	}
	return setupf("CCL_KVS_IFACE=%s: no such network interface here (%s), so oneCCL's KVS cannot bind: unset it or name one of these", name, strings.Join(names, ", "))
}

// checkAffinity: CCL_WORKER_AFFINITY lists the workers of every local rank
// (local rank r's are entries r×W .. r×W+W-1, W = CCL_WORKER_COUNT); a core
// outside this rank's CPU set makes oneCCL fail with "failed to start
// worker".
func checkAffinity(t topology.Topology, cpus envsetup.CPUSet, getenv topology.Getenv) error {
	v := getenv("CCL_WORKER_AFFINITY")
	if v == "" || v == "auto" || len(cpus.Allowed) == 0 {
		return nil
	}
	ids, err := envsetup.ParseCPUList(v)
	if err != nil {
		return setupf("CCL_WORKER_AFFINITY=%s: %v", v, err)
	}
	workers := 1
	if n, err := strconv.Atoi(getenv("CCL_WORKER_COUNT")); err == nil && n > 0 {
		workers = n
	}
	// ParseCPUList sorts and dedups; oneCCL reads the list as written.
	raw := strings.Split(v, ",")
	if !strings.ContainsAny(v, "-") && len(raw) == len(ids) {
		ids = ids[:0]
		for _, s := range raw {
			n, _ := strconv.Atoi(strings.TrimSpace(s))
			ids = append(ids, n)
		}
	}
	allowed := map[int]bool{}
	var list []int
	for _, c := range cpus.Allowed {
		allowed[c.ID] = true
		list = append(list, c.ID)
	}
	for i := t.LocalRank * workers; i < (t.LocalRank+1)*workers && i < len(ids); i++ {
		if !allowed[ids[i]] {
			return setupf("CCL_WORKER_AFFINITY=%s gives local rank %d's worker core %d, outside its CPU set %s: oneCCL would fail with \"failed to start worker\"; unset CCL_WORKER_AFFINITY or list cores of that set",
				v, t.LocalRank, ids[i], envsetup.FormatCPUList(list))
		}
	}
	return nil
}

// HandoffDefault is the size from which a call runs on the handoff worker
// thread rather than on the calling goroutine's thread, as the mpi backend
// does (its threshold, measured there: see docs/mpi-backend.md). Below it
// a call is one cgo call, with no hand-over to wake two threads for: the
// hand-over cost an 8-byte allreduce about 9 µs of its 22 at 2 ranks on a
// 2-core machine (docs/performance.md, "oneCCL"). BATCHKIT_CCL_HANDOFF overrides it (bytes; 0: every call on the
// worker).
const HandoffDefault = 16 << 20

func handoffAt(getenv topology.Getenv) (int, error) {
	v := getenv(envvars.CCLHandoff)
	if v == "" {
		return HandoffDefault, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, setupf("BATCHKIT_CCL_HANDOFF=%s: want a number of bytes (0: every call on the worker thread)", v)
	}
	return n, nil
}
