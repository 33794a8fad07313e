package rendezvous

import (
	"fmt"
	"os"

	"github.com/batchkit/batchkit/trainer/collective/backend"
)

// The file descriptors a rank needs while the world forms, checked against
// its limit (RLIMIT_NOFILE, `ulimit -n`) before it listens or dials. Too
// low a limit otherwise shows up late and elsewhere: accept errors on one
// rank, dials timing out on its peers, the rendezvous timeout.

// fdSpare: descriptors beyond the links that the process may open while
// the world forms (a shared-memory file being made, the runtime's own).
const fdSpare = 16

// filesNeeded is how many descriptors the rendezvous holds at once: rank
// 0 a connection from every rank (they all join it) and its listener; a
// star's other ranks their connection to rank 0; the others their listener,
// the connection to rank 0 and their links.
func (o *Options) filesNeeded(isLink []bool) int {
	switch {
	case o.Rank == 0:
		return o.Size
	case o.star != nil:
		return 1
	}
	n := 2
	for r := 1; r < len(isLink); r++ {
		if isLink[r] {
			n++
		}
	}
	return n
}

// checkFileLimit fails early, as a setup error, when this rank's limit on
// file descriptors is below what the rendezvous needs with what the
// process has open already.
func checkFileLimit(o *Options, isLink []bool) error {
	limit, ok := fileLimit()
	if !ok {
		return nil
	}
	return fileShortage(o.Rank, o.Size, o.filesNeeded(isLink), openFiles(), limit)
}

// fileShortage is the error when need descriptors more (besides inUse and
// fdSpare) do not fit under limit, else nil.
func fileShortage(rank, size, need, inUse int, limit uint64) error {
	total := need + inUse + fdSpare
	if uint64(total) <= limit {
		return nil
	}
	return &backend.SetupError{Err: fmt.Errorf(
		"rendezvous: rank %d of %d needs %d file descriptors (%d for its connections, %d open already, %d to spare) but its limit is %d: raise it with `ulimit -n %d` (or more) where the ranks start",
		rank, size, total, need, inUse, fdSpare, limit, total)}
}

// openFiles counts this process's open descriptors (0 where it cannot).
func openFiles() int {
	for _, dir := range []string{"/proc/self/fd", "/dev/fd"} {
		if fds, err := os.ReadDir(dir); err == nil {
			return max(len(fds)-1, 0) // ReadDir's own descriptor is listed
		}
	}
	return 0
}
