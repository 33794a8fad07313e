package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The MPICH ABI build (make build-mpi MPI=mpich-abi) depends on
// libmpi.so.12, the name Intel MPI, Cray MPICH, MVAPICH2 and MPICH's own
// installs give the library, instead of Debian's libmpich.so.12. Intel MPI
// is not installable here; what is tested is that the binary asks for
// libmpi.so.12 and nothing else, and that it runs as an MPI job when that
// name leads to an MPICH-ABI library (Debian's MPICH, through a link).
func TestMPICHABIBuild(t *testing.T) {
	cpu.enter(t)
	if testing.Short() {
		t.Skip("builds an MPI binary and runs mpirun")
	}
	needTool(t, "mpirun.mpich")
	needTool(t, "patchelf")
	dir := t.TempDir()
	run(t, 5*time.Minute, "make", "-s", "-C", "..", "build-mpi", "MPI=mpich-abi", "BIN="+filepath.Join(dir, "batchkit"))
	abi := filepath.Join(dir, "batchkit-mpich-abi")

	needed := strings.Fields(run(t, time.Minute, "patchelf", "--print-needed", abi))
	var mpiLibs []string
	for _, lib := range needed {
		if strings.Contains(lib, "mpi") {
			mpiLibs = append(mpiLibs, lib)
		}
	}
	if len(mpiLibs) != 1 || mpiLibs[0] != "libmpi.so.12" {
		t.Fatalf("the binary needs %v, want libmpi.so.12 as its only MPI library", needed)
	}

	// Without a libmpi.so.12 the loader refuses it: the name is really used.
	out, err := exec.Command(abi, "--version").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "libmpi.so.12") {
		t.Fatalf("without libmpi.so.12: err %v, output %q; want the loader's error naming libmpi.so.12", err, out)
	}

	lib := filepath.Join(dir, "lib")
	if err := os.Mkdir(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	debian := "/usr/lib/x86_64-linux-gnu/libmpich.so.12"
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("no %s to stand in for libmpi.so.12 on this architecture", debian)
	}
	if err := os.Symlink(debian, filepath.Join(lib, "libmpi.so.12")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mpirun.mpich", "-n", "2", "-genv", "LD_LIBRARY_PATH", lib,
		abi, "bench", "--max-bytes", "1KiB", "--iters", "3", "--format", "json")
	cmd.Env = withoutVar(localEnv(), "LD_LIBRARY_PATH")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun.mpich -n 2 %s bench: %v\n%s", abi, err, b)
	}
	if got := strings.Count(string(b), `"backend":"mpi","mpi_library":"mpich"`); got != 8 {
		t.Errorf("%d result lines on the mpi backend, want 8 (8 B .. 1 KiB):\n%s", got, b)
	}
}
