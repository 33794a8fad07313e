package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The collective conformance suite (trainer/collective TestWorld) run by
// every rank of real worlds: batchkit run, batchkit mpirun, Open MPI's and
// MPICH's mpirun and srun, for the TCP backend and the cgo MPI backends;
// and the MPI binding's own tests (trainer/collective/mpi TestMPI). Each
// test binary is built once and started by the launcher.

var (
	collOnce sync.Map // package and build tag → *collBuild
)

type collBuild struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// collectiveTest returns the collective package's test binary built with tag
// ("" = the default build, no cgo MPI).
func collectiveTest(t *testing.T, tag string) string { return testBinary(t, "collective", tag) }

// mpiTest returns the MPI binding's (trainer/collective/mpi) test binary
// built with tag.
func mpiTest(t *testing.T, tag string) string { return testBinary(t, "collective/mpi", tag) }

// testBinary builds, once per test run, the test binary of the package at
// trainer/pkg with tag.
func testBinary(t *testing.T, pkg, tag string) string {
	t.Helper()
	v, _ := collOnce.LoadOrStore(pkg+" "+tag, &collBuild{})
	b := v.(*collBuild)
	b.once.Do(func() {
		name := strings.ReplaceAll(pkg, "/", "_") + ".test"
		args := []string{"test", "-c"}
		if tag != "" {
			name = strings.ReplaceAll(pkg, "/", "_") + "-" + tag + ".test"
			args = append(args, "-tags", tag)
		}
		b.path = filepath.Join(filepath.Dir(bin), name)
		cmd := exec.Command("go", append(args, "-o", b.path, "../trainer/"+pkg)...)
		if tag == "ccl" {
			cmd.Env = append(os.Environ(), cclCgoEnv()...)
		}
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("building the %s test binary (tag %q): %v\n%s", pkg, tag, b.err, b.out)
	}
	return b.path
}

// runWorld starts the suite under launcher argv (the test binary appended)
// and checks that every one of n ranks ran and passed it.
func runWorld(t *testing.T, n int, env []string, want string, launcher []string, testBin string) {
	t.Helper()
	runRanks(t, n, append(env, "BATCHKIT_TEST_WORLD="+want), launcher, testBin, "TestWorld")
}

// runRanks starts test (a top-level test of testBin) under launcher argv
// and checks that every one of n ranks ran and passed it; it returns the
// output.
func runRanks(t *testing.T, n int, env, launcher []string, testBin, test string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	argv := append(append([]string{}, launcher...), testBin, "-test.run", "^"+test+"$", "-test.v", "-test.count", "1")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	os.Chmod(cmd.Dir, 0o777)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out.String())
	}
	if got := strings.Count(out.String(), "--- PASS: "+test+" ("); got != n {
		t.Fatalf("%d of %d ranks passed %s:\n%s", got, n, test, out.String())
	}
	t.Logf("%d ranks passed %s in %v", n, test, time.Since(start).Round(time.Millisecond))
	return out.String()
}

// TestCollectiveTCP runs alone: under plain Hydra (no job id) its rank 0
// listens on torchrun's default port, 29500, which a guide's torchrun
// takes too.
func TestCollectiveTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real launchers")
	}
	coll := collectiveTest(t, "")
	for _, n := range []string{"2", "3", "4"} {
		t.Run("batchkit run -n "+n, func(t *testing.T) {
			runWorld(t, atoi(n), localEnv(), "tcp", []string{bin, "run", "-n", n, "--"}, coll)
		})
	}
	// Ranks on one host use shared memory between neighbours; between
	// hosts every link is TCP, which BATCHKIT_TCP_SHM=0 forces here.
	t.Run("batchkit run -n 3 with BATCHKIT_TCP_SHM=0", func(t *testing.T) {
		runWorld(t, 3, append(localEnv(), "BATCHKIT_TCP_SHM=0"), "tcp", []string{bin, "run", "-n", "3", "--"}, coll)
	})
	t.Run("batchkit run -n 1 needs no network", func(t *testing.T) {
		runWorld(t, 1, localEnv(), "self", []string{bin, "run", "-n", "1", "--"}, coll)
	})
	// Plain mpirun sets no BATCHKIT_JOB_TOKEN: the token is derived from the
	// launcher's job id and the user's secret.
	t.Run("mpirun.openmpi -n 3", func(t *testing.T) {
		needTool(t, "mpirun.openmpi")
		runWorld(t, 3, localEnv(), "tcp", []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", "3"}, coll)
	})
	// Hydra exposes no job id to its ranks: the token must be handed down,
	// in the environment (Hydra forwards it), as batchkit mpirun does.
	t.Run("mpirun.mpich -n 2 with an exported token", func(t *testing.T) {
		needTool(t, "mpirun.mpich")
		env := append(localEnv(), "BATCHKIT_JOB_TOKEN=integration-"+time.Now().Format(time.RFC3339Nano))
		runWorld(t, 2, env, "tcp", []string{"mpirun.mpich", "-n", "2"}, coll)
	})
	t.Run("mpirun.mpich without a token says how to get one", func(t *testing.T) {
		needTool(t, "mpirun.mpich")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "mpirun.mpich", "-n", "2", coll, "-test.run", "^TestWorld$")
		cmd.Env = append(withoutVar(localEnv(), "BATCHKIT_JOB_TOKEN"), "BATCHKIT_TEST_WORLD=tcp")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "BATCHKIT_JOB_TOKEN is unset") {
			t.Fatalf("err = %v, want a failure naming BATCHKIT_JOB_TOKEN:\n%s", err, out)
		}
	})
	for _, f := range mpirunFlavors {
		t.Run("batchkit mpirun --flavor "+f.flavor+" -n 3", func(t *testing.T) {
			needTool(t, f.binary)
			args := append([]string{bin, "mpirun", "--flavor", f.flavor, "-n", "3"}, f.flags...)
			runWorld(t, 3, withoutVar(localEnv(), "BATCHKIT_JOB_TOKEN"), "tcp", append(args, "--"), coll)
		})
	}
	t.Run("srun -N2 -n4", func(t *testing.T) {
		needCluster(t)
		runWorld(t, 4, os.Environ(), "tcp", []string{"srun", "-N2", "-n4", "--time=5"}, coll)
	})
}

func TestCollectiveMPI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real launchers")
	}
	// The worlds each flavor runs on this host: the suite and the binding's
	// own tests (TestMPI). What depends on the number of ranks is Go code
	// both builds share (the fallbacks' blocks, the world checks), run on
	// 2, 3 and 4 ranks under Open MPI; what differs between the libraries
	// (handles, types, errors, init) does not depend on it, run on 2 ranks
	// under both. MPICH's ranks poll the CPU while they wait: 3 or 4 of them
	// on two cores took 10 to 25 times as long as 2 (TestMPI on 3: 48 s
	// against 2 s), so its 3-rank world is the srun one below, across nodes.
	for _, f := range []struct {
		tag, mpirun string
		flags       []string
		worlds      []string // TestWorld's world sizes
		mpiWorlds   []string // TestMPI's
	}{
		{"mpi", "mpirun.openmpi", []string{"--allow-run-as-root", "--oversubscribe"}, []string{"2", "3", "4"}, []string{"2", "3"}},
		{"mpich", "mpirun.mpich", nil, []string{"2"}, []string{"2"}},
	} {
		t.Run(f.tag, func(t *testing.T) {
			needTool(t, f.mpirun)
			coll := collectiveTest(t, f.tag)
			for _, n := range f.worlds {
				t.Run("mpirun -n "+n, func(t *testing.T) {
					runWorld(t, atoi(n), localEnv(), "mpi", append(append([]string{f.mpirun}, f.flags...), "-n", n), coll)
				})
			}
			// Not started by an MPI launcher: auto picks tcp even in an MPI build.
			t.Run("batchkit run -n 2 picks tcp", func(t *testing.T) {
				runWorld(t, 2, localEnv(), "tcp", []string{bin, "run", "-n", "2", "--"}, coll)
			})
			// The backend's own tests (errors, chunking, the worker thread,
			// a second communicator, finalisation), and a short run of the
			// in-process overhead measurement, so that it keeps working:
			// every window's result is checked.
			mpiBin := mpiTest(t, f.tag)
			for _, n := range f.mpiWorlds {
				t.Run("TestMPI mpirun -n "+n, func(t *testing.T) {
					runRanks(t, atoi(n), localEnv(), append(append([]string{f.mpirun}, f.flags...), "-n", n), mpiBin, "TestMPI")
				})
			}
			// No launcher: the test starts its own MPI singleton, which aborts.
			t.Run("TestMPIAbortLikeC", func(t *testing.T) {
				runRanks(t, 1, localEnv(), nil, mpiBin, "TestMPIAbortLikeC")
			})
			t.Run("BenchmarkMPIOverhead mpirun -n 2", func(t *testing.T) {
				env := append(localEnv(), "BATCHKIT_MPI_BENCH_MIN=65536",
					"BATCHKIT_MPI_BENCH_MAX=131072", "BATCHKIT_MPI_OVERHEAD_ROUNDS=2", "BATCHKIT_MPI_OVERHEAD_BUDGET=0")
				argv := append(append([]string{f.mpirun}, f.flags...), "-n", "2")
				if f.tag == "mpi" {
					argv = append(argv, "-x", "BATCHKIT_MPI_BENCH_MIN",
						"-x", "BATCHKIT_MPI_BENCH_MAX", "-x", "BATCHKIT_MPI_OVERHEAD_ROUNDS", "-x", "BATCHKIT_MPI_OVERHEAD_BUDGET")
				}
				argv = append(argv, mpiBin, "-test.run", "^$", "-test.bench", "^BenchmarkMPIOverhead$", "-test.benchtime", "1x")
				ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
				cmd.Env, cmd.Dir = env, t.TempDir()
				os.Chmod(cmd.Dir, 0o777)
				b, err := cmd.CombinedOutput()
				out := string(b)
				// Words, not lines: the two ranks' output interleaves, even
				// mid-line ("BenchmarkMPIOverhead-2 \tPASS" seen in CI).
				if err != nil || len(passWord.FindAllStringIndex(out, -1)) != 2 {
					t.Fatalf("%s: %v, want PASS from both ranks:\n%s", strings.Join(argv, " "), err, out)
				}
				if got := strings.Count(out, `"go_vs_c":`); got != 2 {
					t.Errorf("%d result lines, want 2 (64 and 128 KiB, rank 0):\n%s", got, out)
				}
			})
		})
	}
	// 3 ranks on 2 nodes: an odd world, and nodes of 2 ranks and of 1.
	t.Run("mpich srun --mpi=pmi2", func(t *testing.T) {
		needCluster(t)
		coll := collectiveTest(t, "mpich")
		t.Run("-N2 -n3", func(t *testing.T) {
			runWorld(t, 3, os.Environ(), "mpi", []string{"srun", "-N2", "-n3", "--mpi=pmi2", "--time=5"}, coll)
		})
	})
	// A launcher whose process management the built library cannot use:
	// auto picks tcp, and an explicit mpi is refused before MPI_Init with
	// what to do (Open MPI would abort inside it, MPICH come up as
	// singletons).
	t.Run("openmpi build under srun --mpi=pmi2 picks tcp", func(t *testing.T) {
		needCluster(t)
		runWorld(t, 2, os.Environ(), "tcp", []string{"srun", "-N2", "-n2", "--mpi=pmi2", "--time=5"}, collectiveTest(t, "mpi"))
	})
	t.Run("mpich build under mpirun.openmpi picks tcp", func(t *testing.T) {
		needTool(t, "mpirun.openmpi")
		runWorld(t, 2, localEnv(), "tcp", []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", "2"}, collectiveTest(t, "mpich"))
	})
	t.Run("openmpi build with --backend mpi under mpirun.mpich is refused", func(t *testing.T) {
		needTool(t, "mpirun.mpich")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "mpirun.mpich", "-n", "2", collectiveTest(t, "mpi"), "-test.run", "^TestWorld$")
		cmd.Env = append(localEnv(), "BATCHKIT_TEST_WORLD=mpi", "BATCHKIT_TEST_BACKEND=mpi")
		out, err := cmd.CombinedOutput()
		want := "the hydra launcher started 2 processes (this is rank 0), which this binary's MPI cannot join: this binary is built against Open MPI"
		if err == nil || !strings.Contains(string(out), want) {
			t.Fatalf("err = %v, want a failure saying %q:\n%s", err, want, out)
		}
	})
}

func withoutVar(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// passWord is go test's PASS, as a word.
var passWord = regexp.MustCompile(`\bPASS\b`)
