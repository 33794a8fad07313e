package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	prefix, why := intelStack()
	if why != "" {
		requireOrSkip(t, why)
	}
	return prefix
}

// intelStack is the Intel stack's prefix, or why it is not installed.
func intelStack() (prefix, why string) {
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
	return intelOnce.prefix, intelOnce.err
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
		// Go's build cache keys cgo packages by the pkg-config command,
		// not PKG_CONFIG_PATH: the CGO_CFLAGS word keeps these objects
		// apart from Debian MPICH's (Makefile, INTEL_CGO_KEY).
		key, err := exec.Command("../scripts/intel-stack.sh", "cgo-key").Output()
		if intelBuild.err = err; err != nil {
			return
		}
		for _, s := range steps {
			cmd := exec.Command(s[0], s[1:]...)
			cmd.Env = append(os.Environ(), "PKG_CONFIG_PATH="+filepath.Join(dir, "pkgconfig-intel"),
				"CGO_CFLAGS=-O2 -g "+strings.TrimSpace(string(key)))
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
	// The build tag says mpich (the ABI); the library loaded says Intel MPI.
	if v := runEnv(t, env, abi, "version"); !strings.Contains(v, "backends: tcp, mpi (mpich: Intel(R) MPI Library 20") {
		t.Errorf("batchkit version does not name the Intel MPI library it loaded:\n%s", v)
	}
	coll, binding := filepath.Join(dir, "collective.test"), filepath.Join(dir, "collective_mpi.test")
	// Two worlds at a time: their ranks poll the CPU while they wait.
	twoWorlds := make(gate, 2)
	for _, n := range []string{"2", "3"} {
		t.Run("TestWorld mpiexec -n "+n, func(t *testing.T) {
			twoWorlds.enter(t)
			runWorld(t, atoi(n), env, "mpi", []string{mpiexec, "-n", n}, coll)
		})
		t.Run("TestMPI mpiexec -n "+n, func(t *testing.T) {
			twoWorlds.enter(t)
			runRanks(t, atoi(n), env, []string{mpiexec, "-n", n}, binding, "TestMPI")
		})
	}
	// 3 ranks on 2 nodes: an odd world, nodes of 2 ranks and of 1 (4 ranks
	// polling two cores took 40 s here, 3 took 30).
	t.Run("TestWorld srun --mpi=pmi2 -N2 -n3", func(t *testing.T) {
		needCluster(t)
		if _, err := os.Stat(intelPMI2); err != nil {
			requireOrSkip(t, intelPMI2+" is missing (apt-get install libpmi2-0)")
		}
		twoWorlds.enter(t)
		runWorld(t, 3, intelEnv(os.Environ(), "I_MPI_PMI_LIBRARY="+intelPMI2), "mpi",
			[]string{"srun", "-N2", "-n3", "--mpi=pmi2", "--time=5"}, coll)
	})
	t.Run("batchkit train --backend mpi", func(t *testing.T) {
		twoWorlds.enter(t)
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

// intelRankLine is what each rank prints in TestIntelPipProfile.
const intelRankLine = `echo "INTEL rank=$RANK/$WORLD_SIZE local=$LOCAL_RANK node=${GROUP_RANK-?} master=$MASTER_ADDR root=$I_MPI_ROOT omp=$OMP_NUM_THREADS mpiexec=$(command -v mpiexec)"`

// The intel-pip profile with the venv active ($VIRTUAL_ENV, nothing else of
// Intel's set) runs Intel MPI's Hydra for real: on this host; with the
// seed workflow's hostfile (-f hostfile -n 4 -ppn 2 -genv) across the two
// cluster nodes in an allocation (Hydra's Slurm bootstrap); as a batch
// job; and as an srun --mpi=pmi2 step.
func TestIntelPipProfile(t *testing.T) {
	prefix := needIntel(t)
	venv := "VIRTUAL_ENV=" + prefix
	check := func(t *testing.T, out string, n, ppn int) {
		t.Helper()
		for r := 0; r < n; r++ {
			want := regexp.MustCompile(fmt.Sprintf(`(?m)^INTEL rank=%d/%d local=%d .*root=%s omp=\d+ mpiexec=%s/bin/mpiexec$`,
				r, n, r%ppn, regexp.QuoteMeta(prefix), regexp.QuoteMeta(prefix)))
			if !want.MatchString(out) {
				t.Errorf("no line matching %s:\n%s", want, out)
			}
		}
	}
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		out := runEnv(t, intelEnv(localEnv(), venv), bin, "mpirun", "--profile", "intel-pip", "-n", "2", "--", "sh", "-c", intelRankLine)
		check(t, out, 2, 2)
	})
	t.Run("hostfile across nodes", func(t *testing.T) {
		needCluster(t)
		t.Parallel()
		dir := t.TempDir()
		hf := filepath.Join(dir, "hostfile")
		if err := os.WriteFile(hf, []byte("node1\nnode2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out := runEnv(t, intelEnv(os.Environ(), venv), "salloc", "-N2", "--time=5", bin, "mpirun", "--profile", "intel-pip",
			"--hostfile", hf, "-n", "4", "--ppn", "2", "--env", "OMP_NUM_THREADS=1", "--", "sh", "-c", intelRankLine)
		check(t, out, 4, 2)
		if !strings.Contains(out, "master=node1 ") || !strings.Contains(out, "omp=1 ") {
			t.Errorf("want MASTER_ADDR node1 and the -genv OMP_NUM_THREADS 1 on every rank:\n%s", out)
		}
	})
	t.Run("sbatch", func(t *testing.T) {
		needCluster(t)
		t.Parallel()
		dir := t.TempDir()
		os.Chmod(dir, 0o777)
		jobOut := filepath.Join(dir, "job.out")
		runEnv(t, intelEnv(os.Environ(), venv), bin, "sbatch", "--profile", "intel-pip", "--wait", "-N", "2", "--ntasks-per-node", "2",
			"--time", "5", "-o", jobOut, "--", "sh", "-c", intelRankLine)
		b, _ := os.ReadFile(jobOut)
		check(t, string(b), 4, 2)
	})
	// --launcher srun: batchkit sets I_MPI_PMI_LIBRARY to Slurm's libpmi2
	// itself (mpirun.SrunLibEnv); nothing of the test's says where it is.
	// One rank a node: what is tested is that wiring, across nodes; the
	// binding's world with two ranks on a node is TestIntelMPIBackend's (two
	// such worlds here, their ranks polling two cores, took 80 s).
	t.Run("srun --mpi=pmi2", func(t *testing.T) {
		needCluster(t)
		if _, err := os.Stat(intelPMI2); err != nil {
			requireOrSkip(t, intelPMI2+" is missing (apt-get install libpmi2-0)")
		}
		t.Parallel()
		dir := intelBinaries(t)
		coll := filepath.Join(dir, "collective.test")
		world := []string{"--", coll, "-test.run", "^TestWorld$", "-test.v", "-test.count", "1"}
		env := intelEnv(os.Environ(), venv, "BATCHKIT_TEST_WORLD=mpi")
		passed := func(what, out string) {
			if got := strings.Count(out, "--- PASS: TestWorld ("); got != 2 {
				t.Errorf("%s: %d of 2 ranks passed TestWorld on the mpi backend:\n%s", what, got, out)
			}
		}
		out := runEnv(t, env, bin, append([]string{"mpirun", "--profile", "intel-pip", "--launcher", "srun",
			"-n", "2", "--mpi-arg", "-N2", "--mpi-arg", "--time=5"}, world...)...)
		passed("batchkit mpirun --launcher srun", out)
		jobDir := t.TempDir()
		os.Chmod(jobDir, 0o777)
		jobOut := filepath.Join(jobDir, "job.out")
		runEnv(t, env, bin, append([]string{"sbatch", "--profile", "intel-pip", "--launcher", "srun", "--wait",
			"-N", "2", "--ntasks-per-node", "1", "--time", "5", "-o", jobOut}, world...)...)
		b, _ := os.ReadFile(jobOut)
		passed("batchkit sbatch --launcher srun", string(b))
	})
}

// Bad input under the Intel profiles: one line naming the cause and the
// fix, exit 2, within seconds, nothing started.
func TestIntelBadInput(t *testing.T) {
	prefix := needIntel(t)
	half := t.TempDir()
	os.MkdirAll(filepath.Join(half, "bin"), 0o755)
	os.Symlink(filepath.Join(prefix, "bin", "mpiexec.hydra"), filepath.Join(half, "bin", "mpiexec.hydra"))
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no venv active", nil, []string{"mpirun", "--profile", "intel-pip", "-n", "2", "--", "true"},
			`env.intel_wheels is "$VIRTUAL_ENV", but no virtual environment is active`},
		{"half-installed wheel", []string{"VIRTUAL_ENV=" + half}, []string{"mpirun", "--profile", "intel-pip", "-n", "2", "--", "true"},
			`has no bin/hydra_pmi_proxy: the impi-rt wheel is missing or half-installed there`},
		{"missing venv", []string{"VIRTUAL_ENV=/nonexistent/venv"}, []string{"sbatch", "--profile", "intel-pip", "-N", "1", "--", "true"},
			`/nonexistent/venv is not a directory`},
		{"Open MPI's mpirun on PATH", nil, []string{"mpirun", "--flavor", "intelmpi", "-n", "2", "--", "true"},
			`mpirun (/usr/bin/mpirun) is Open MPI's, not Intel MPI's: put Intel MPI's first on PATH`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if strings.Contains(tc.name, "Open MPI") {
				needTool(t, "mpirun.openmpi")
			}
			code, took, out := runExit(t, intelEnv(localEnv(), tc.env...), append([]string{bin}, tc.args...))
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != 2 || took > 5*time.Second || len(lines) != 1 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d after %v, output:\n%s\nwant exit 2 within seconds and one line containing %q", code, took, out, tc.want)
			}
		})
	}
}
