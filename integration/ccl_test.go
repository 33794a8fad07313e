package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The oneCCL backend (trainer/collective/ccl, build tag ccl) against the
// Intel stack of `make intel-stack`: the conformance suite under every
// launcher (its world meets over batchkit's rendezvous, whatever started
// it), a rank killed mid-training, and the refusals a user meets.

// intelPrefix is where scripts/intel-stack.sh installs the stack (the
// script's answer: its default and BATCHKIT_INTEL_PREFIX live there only).
func intelPrefix() string {
	out, err := exec.Command("../scripts/intel-stack.sh", "prefix").Output()
	if err != nil {
		return "" // needIntel has failed the test already
	}
	return strings.TrimSpace(string(out))
}

// cclCgoEnv is what `make build-ccl` gives cgo.
func cclCgoEnv() []string {
	p := intelPrefix()
	return []string{"CGO_CPPFLAGS=-I" + p + "/include",
		"CGO_LDFLAGS=-L" + p + "/lib -Wl,--disable-new-dtags -Wl,-rpath," + p + "/lib"}
}

// cclBinary builds batchkit with the ccl tag, once.
func cclBinary(t *testing.T) string {
	t.Helper()
	v, _ := collOnce.LoadOrStore("batchkit ccl", &collBuild{})
	b := v.(*collBuild)
	b.once.Do(func() {
		b.path = filepath.Join(filepath.Dir(bin), "batchkit-ccl")
		cmd := exec.Command("go", "build", "-tags", "ccl", "-o", b.path, "../cmd/batchkit")
		cmd.Env = append(os.Environ(), cclCgoEnv()...)
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("building batchkit -tags ccl: %v\n%s", b.err, b.out)
	}
	return b.path
}

func TestCollectiveCCL(t *testing.T) {
	needIntel(t)
	coll := collectiveTest(t, "ccl")
	env := append(localEnv(), "BATCHKIT_TEST_BACKEND=ccl")
	// 1 rank, and 2 and 3: a power of two and not, where oneCCL's
	// algorithms part. 4 ranks (20 to 80 s on two cores, its ranks polling)
	// add no case the binding handles differently.
	for _, n := range []string{"1", "2", "3"} {
		t.Run("batchkit run -n "+n, func(t *testing.T) {
			runWorld(t, atoi(n), env, "ccl", []string{bin, "run", "-n", n, "--"}, coll)
		})
	}
	// Hydra exposes no job id: the token travels in the environment.
	t.Run("Intel MPI mpiexec -n 2", func(t *testing.T) {
		env := append(env, "BATCHKIT_JOB_TOKEN=integration-"+time.Now().Format(time.RFC3339Nano))
		runWorld(t, 2, env, "ccl", []string{filepath.Join(intelPrefix(), "bin", "mpiexec"), "-n", "2"}, coll)
	})
	t.Run("mpirun.openmpi -n 2", func(t *testing.T) {
		needTool(t, "mpirun.openmpi")
		runWorld(t, 2, env, "ccl", []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", "2"}, coll)
	})
	t.Run("srun -N2 -n2", func(t *testing.T) {
		needCluster(t)
		runWorld(t, 2, append(os.Environ(), "BATCHKIT_TEST_BACKEND=ccl"), "ccl", []string{"srun", "-N2", "-n2", "--time=5"}, coll)
	})
}

// TestTrainCCL: the trainer on oneCCL reaches the TCP backend's weights bit
// for bit; a rank killed mid-training ends the other with a line naming it;
// a rank stopped mid-call makes the other's call give up at --timeout.
func TestTrainCCL(t *testing.T) {
	needIntel(t)
	b := cclBinary(t)
	sha := func(backend string) string {
		out := runLocal(t, b, "run", "-n", "2", "--", b, "train", "--backend", backend, "--epochs", "3", "--format", "json")
		i := strings.Index(out, `"weights_sha256":"`)
		if i < 0 {
			t.Fatalf("no weights_sha256 in:\n%s", out)
		}
		return out[i : i+18+64]
	}
	if tcp, ccl := sha("tcp"), sha("ccl"); tcp != ccl {
		t.Errorf("weights differ: tcp %s, ccl %s", tcp, ccl)
	}
	t.Run("a killed rank is named", func(t *testing.T) {
		// Started without a launcher that would stop the survivor itself.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		port := "2" + time.Now().Format("0405") // 20000-25959: below the ephemeral range
		var cmds [2]*exec.Cmd
		var outs [2]strings.Builder
		for r := range cmds {
			cmds[r] = exec.CommandContext(ctx, b, "train", "--backend", "ccl", "--epochs", "100000")
			cmds[r].Env = append(localEnv(), "RANK="+strconv.Itoa(r), "WORLD_SIZE=2", "LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE=2",
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port, "BATCHKIT_JOB_TOKEN=kill-test")
			cmds[r].Stdout, cmds[r].Stderr = &outs[r], &outs[r]
			if err := cmds[r].Start(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Second)
		cmds[1].Process.Kill()
		cmds[1].Wait()
		err := cmds[0].Wait()
		want := "rank 1 at 127.0.0.1:"
		if err == nil || !strings.Contains(outs[0].String(), want) || !strings.Contains(outs[0].String(), "left the job") {
			t.Fatalf("rank 0: %v, want a failure naming rank 1:\n%s", err, lastLines(outs[0].String()))
		}
	})
	t.Run("a stopped rank times the call out", func(t *testing.T) {
		// SIGSTOP leaves rank 1's connections open: no rank is lost, and
		// rank 0's call in flight must give up at --timeout (the shim's
		// deadline, which starts at the call's 256th progress pass).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		port := "2" + time.Now().Add(time.Minute).Format("0405")
		var cmds [2]*exec.Cmd
		var outs [2]strings.Builder
		for r := range cmds {
			cmds[r] = exec.CommandContext(ctx, b, "bench", "--backend", "ccl", "--max-bytes", "8", "--iters", "1000000000", "--timeout", "3s")
			cmds[r].Env = append(localEnv(), "RANK="+strconv.Itoa(r), "WORLD_SIZE=2", "LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE=2",
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port, "BATCHKIT_JOB_TOKEN=stop-test")
			cmds[r].Stdout, cmds[r].Stderr = &outs[r], &outs[r]
			if err := cmds[r].Start(); err != nil {
				t.Fatal(err)
			}
		}
		defer func() { cmds[1].Process.Kill(); cmds[1].Wait() }()
		time.Sleep(5 * time.Second)
		cmds[1].Process.Signal(syscall.SIGSTOP)
		stopped := time.Now()
		err := cmds[0].Wait()
		took := time.Since(stopped)
		if err == nil || !strings.Contains(outs[0].String(), "did not complete within 3s") || took > 30*time.Second {
			t.Fatalf("rank 0: %v after %v, want a failure naming the 3s timeout:\n%s", err, took, lastLines(outs[0].String()))
		}
		t.Logf("rank 0 gave up %.1f s after rank 1 stopped", took.Seconds())
	})
	t.Run("a build without ccl names make build-ccl", func(t *testing.T) {
		cmd := exec.Command(bin, "train", "--backend", "ccl")
		cmd.Env = localEnv()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "make build-ccl") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Fatalf("%v, want exit 2 and one line naming make build-ccl:\n%s", err, out)
		}
	})
}

// tail is the last lines of s, for failure messages.
func lastLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}
