package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Intel MPI for real: the wheels of scripts/intel-wheels.txt, installed by
// scripts/intel-stack.sh (make intel-stack) into BATCHKIT_INTEL_PREFIX,
// default /opt/batchkit/intel. Without them these tests skip, or fail under
// BATCHKIT_REQUIRE_CLUSTER=1 (make test installs them first).

// intelPMI2 is Slurm's PMI-2 client library, which Intel MPI ranks started
// by srun --mpi=pmi2 load through I_MPI_PMI_LIBRARY (Debian: libpmi2-0).
const intelPMI2 = "/usr/lib/x86_64-linux-gnu/libpmi2.so.0"

var intelOnce struct {
	sync.Once
	prefix string
	err    string
}

// needIntel returns the Intel stack's prefix, skipping (or failing) the
// test when scripts/intel-stack.sh check says it is not installed.
func needIntel(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs Intel MPI")
	}
	intelOnce.Do(func() {
		out, err := exec.Command("../scripts/intel-stack.sh", "check").CombinedOutput()
		if err != nil {
			intelOnce.err = "the Intel MPI wheels are not installed: " + strings.TrimSpace(string(out)) + " (make intel-stack)"
			return
		}
		p, err := exec.Command("../scripts/intel-stack.sh", "prefix").Output()
		if err != nil {
			intelOnce.err = "scripts/intel-stack.sh prefix: " + err.Error()
			return
		}
		intelOnce.prefix = strings.TrimSpace(string(p))
	})
	if intelOnce.err != "" {
		requireOrSkip(t, intelOnce.err)
	}
	return intelOnce.prefix
}

// intelEnv is localEnv with nothing of Intel's set but what is given:
// no LD_LIBRARY_PATH, I_MPI_* or FI_*, as in a fresh login shell.
func intelEnv(base []string, set ...string) []string {
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if k == "LD_LIBRARY_PATH" || k == "VIRTUAL_ENV" || strings.HasPrefix(k, "I_MPI_") || strings.HasPrefix(k, "FI_") || strings.HasPrefix(k, "CCL_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, set...)
}

var intelBuild struct {
	sync.Once
	dir string // holds batchkit-intel, the test binaries and pkgconfig-intel/
	err error
	out []byte
}

// intelBinaries builds, once, `make build-mpi MPI=intel` and the collective
// and MPI binding test binaries against the same pkg-config file.
func intelBinaries(t *testing.T) (dir string) {
	t.Helper()
	needIntel(t)
	intelBuild.Do(func() {
		dir := filepath.Join(filepath.Dir(bin), "intel")
		intelBuild.dir = dir
		steps := [][]string{{"make", "-s", "-C", "..", "build-mpi", "MPI=intel", "BIN=" + filepath.Join(dir, "batchkit")}}
		for _, pkg := range []string{"collective", "collective/mpi"} {
			out := filepath.Join(dir, strings.ReplaceAll(pkg, "/", "_")+".test")
			steps = append(steps, []string{"go", "test", "-c", "-tags", "mpich", "-o", out, "../trainer/" + pkg})
		}
		for _, s := range steps {
			cmd := exec.Command(s[0], s[1:]...)
			cmd.Env = append(os.Environ(), "PKG_CONFIG_PATH="+filepath.Join(dir, "pkgconfig-intel"))
			if intelBuild.out, intelBuild.err = cmd.CombinedOutput(); intelBuild.err != nil {
				intelBuild.out = append([]byte(strings.Join(s, " ")+":\n"), intelBuild.out...)
				return
			}
		}
	})
	if intelBuild.err != nil {
		t.Fatalf("building against Intel MPI: %v\n%s", intelBuild.err, intelBuild.out)
	}
	return intelBuild.dir
}

// make build-mpi MPI=intel links the wheel's own libmpi.so.12 (no other MPI
// library, no patchelf) with a RUNPATH to the wheel, so the binary starts
// with no LD_LIBRARY_PATH; it passes the collective conformance suite and
// the binding's own tests under Intel MPI's mpiexec, and as an srun
// --mpi=pmi2 step through Slurm's PMI-2 library; batchkit train --backend
// mpi runs under it.
func TestIntelMPIBackend(t *testing.T) {
	prefix := needIntel(t)
	dir := intelBinaries(t)
	abi := filepath.Join(dir, "batchkit-intel")
	out, err := exec.Command("readelf", "-d", abi).Output()
	if err != nil {
		t.Fatalf("readelf -d %s: %v", abi, err)
	}
	var needed []string
	for _, line := range strings.Split(string(out), "\n") {
		if _, lib, ok := strings.Cut(line, "Shared library: ["); ok && strings.Contains(lib, "mpi") {
			needed = append(needed, strings.TrimSuffix(lib, "]"))
		}
	}
	if len(needed) != 1 || needed[0] != "libmpi.so.12" {
		t.Errorf("the binary's MPI libraries are %v, want libmpi.so.12 alone", needed)
	}
	if want := "Library runpath: [" + prefix + "/lib]"; !strings.Contains(string(out), want) {
		t.Errorf("readelf -d lacks %q:\n%s", want, out)
	}

	mpiexec := filepath.Join(prefix, "bin", "mpiexec")
	env := intelEnv(localEnv())
	coll, binding := filepath.Join(dir, "collective.test"), filepath.Join(dir, "collective_mpi.test")
	for _, n := range []string{"2", "3"} {
		t.Run("TestWorld mpiexec -n "+n, func(t *testing.T) {
			t.Parallel()
			runWorld(t, atoi(n), env, "mpi", []string{mpiexec, "-n", n}, coll)
		})
		t.Run("TestMPI mpiexec -n "+n, func(t *testing.T) {
			t.Parallel()
			runRanks(t, atoi(n), env, []string{mpiexec, "-n", n}, binding, "TestMPI")
		})
	}
	t.Run("TestWorld srun --mpi=pmi2 -N2 -n4", func(t *testing.T) {
		needCluster(t)
		if _, err := os.Stat(intelPMI2); err != nil {
			requireOrSkip(t, intelPMI2+" is missing (apt-get install libpmi2-0)")
		}
		t.Parallel()
		runWorld(t, 4, intelEnv(os.Environ(), "I_MPI_PMI_LIBRARY="+intelPMI2), "mpi",
			[]string{"srun", "-N2", "-n4", "--mpi=pmi2", "--time=5"}, coll)
	})
	t.Run("batchkit train --backend mpi", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, abi, "mpirun", "--flavor", "intelmpi", "--mpirun", mpiexec, "-n", "2", "--",
			abi, "train", "--backend", "mpi", "--epochs", "2", "--format", "json")
		cmd.Env, cmd.Dir = env, t.TempDir()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		}
		if !strings.Contains(stdout.String(), `"world_size":2,"backend":"mpi"`) {
			t.Errorf("want a 2-rank result on the mpi backend:\n%s", stdout.String())
		}
	})
}
