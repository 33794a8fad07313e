// Package ccl is the oneCCL backend of package collective: cgo over the
// oneCCL the binary is built against (build tag ccl, make build-ccl). The
// installed oneCCL (the oneccl-cpu 2021.16 wheel, scripts/intel-stack.sh)
// has only the C++ API, so the binding is a thin extern "C" shim over it
// (shim.h, shim.cpp) that catches every exception and returns a code and
// its text. Without the tag it has no cgo: Built is false and New returns
// ErrNotBuilt.
//
// The world meets over batchkit's own authenticated rendezvous (tcp.JoinStar
// at MASTER_ADDR:MASTER_PORT with the job token): rank 0 creates oneCCL's
// main KVS and hands its address to every rank, which then join the
// communicator. So the backend works under any launcher (batchkit run,
// srun, sbatch, every mpirun), and the rendezvous connections stay open as
// a watchdog: a rank that dies is named to every other rank, whose call in
// flight returns an error instead of hanging in oneCCL. A call moving less
// than HandoffDefault (16 MiB; BATCHKIT_CCL_HANDOFF) runs on the calling
// thread, one cgo call (bkccl_direct) that polls oneCCL's event and an
// abort flag the watchdog sets; larger ones, and AllreduceIdle's calls
// beside compute (tested between sleeps, internal/handoff/idle.h), run on a
// worker thread (internal/handoff) the goroutine can give up on. The rendezvous timeout
// bounds each call either way. Handing every call to the worker cost an
// 8-byte allreduce ~9 µs of its 22 (two thread wake-ups) against 12 µs for
// oneCCL called from C++; direct, it took 13. A direct call now allocates
// nothing and reads no clock (both cost a share of a 5 µs call here):
// BenchmarkCCLOverhead (overhead_test.go) measures the Go path against the
// C++ reference's loop in one process (docs/performance.md, "The oneCCL
// backend").
//
// Where to read: check.go (what needs no oneCCL: the environment oneCCL is
// given and checked against, the errors), ccl.go (the binding), shim.cpp.
package ccl
