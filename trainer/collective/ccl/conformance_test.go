//go:build ccl

package ccl_test

import (
	"testing"

	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/ccl"
	"github.com/batchkit/batchkit/trainer/collective/internal/conform"
)

// TestConformance runs the shared conformance suite on a oneCCL world of
// one in this process (oneCCL is initialised once per process, so larger
// worlds are one process a rank: the integration tests run collective's
// TestWorld with BATCHKIT_TEST_BACKEND=ccl under batchkit run, mpiexec,
// mpirun and srun).
func TestConformance(t *testing.T) {
	conform.Run(t, []int{1}, func(t *testing.T, size int) []backend.Backend {
		return []backend.Backend{ccl.WorldOfOne(t)}
	})
}
