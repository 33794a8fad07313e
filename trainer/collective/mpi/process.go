package mpi

import (
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"github.com/batchkit/batchkit/topology"
)

// SetupProcess adapts the whole process to the MPI backend. The library
// never does this by itself, since both changes are process-wide: a
// program calls it once it runs on MPI (cmd/batchkit does, after Init
// picks the mpi backend). It
//
//   - raises GOMAXPROCS from 1 to 2, unless GOMAXPROCS is set in getenv's
//     environment. Go picks 1 when the launcher binds each rank to one core
//     (Open MPI's default); then the runtime hands off the P of every MPI
//     call longer than 20 µs, thousands of thread wake-ups a second on the
//     core the rank busy-polls on (2-3× C's time at 64 KiB);
//   - makes SIGABRT end the process as it ends a C program: by the signal
//     (status 134 in a shell), without Go's goroutine dump and exit status
//     2. MPI libraries call abort() on fatal errors they cannot return (a
//     peer gone mid-transfer) after printing why.
//
// See docs/mpi-backend.md.
func SetupProcess(getenv topology.Getenv) {
	if n := mpiProcs(runtime.GOMAXPROCS(0), getenv); n != runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(n)
	}
	abortLikeC()
}

// mpiProcs is the GOMAXPROCS SetupProcess sets, given the current one:
// at least 2, unless the user chose it in the environment.
func mpiProcs(current int, getenv topology.Getenv) int {
	if current >= 2 || (getenv != nil && getenv("GOMAXPROCS") != "") {
		return current
	}
	return 2
}

// abortLikeC: abort() restores the default action and raises again once
// the handler returns; a SIGABRT from kill(1) is re-raised here.
var abortOnce sync.Once

func abortLikeC() {
	abortOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGABRT)
		go func() {
			<-ch
			signal.Reset(syscall.SIGABRT)
			syscall.Kill(os.Getpid(), syscall.SIGABRT) //nolint:errcheck // the process ends here
		}()
	})
}
