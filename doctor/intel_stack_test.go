package doctor

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Tests against the real Intel stack of scripts/intel-stack.sh (impi-rt
// 2021.18.1, oneccl-cpu 2021.16.1 in a venv). Skipped without it, failed
// under BATCHKIT_REQUIRE_CLUSTER=1 (make test), as integration's are.

func intelPrefix(t *testing.T) string {
	t.Helper()
	p := os.Getenv("BATCHKIT_INTEL_PREFIX")
	if p == "" {
		p = "/opt/batchkit/intel"
	}
	if _, err := os.Stat(filepath.Join(p, "lib", "libmpi.so.12")); err != nil {
		reason := "the Intel stack is not installed in " + p + " (scripts/intel-stack.sh install)"
		if os.Getenv("BATCHKIT_REQUIRE_CLUSTER") == "1" {
			t.Fatal(reason + " (BATCHKIT_REQUIRE_CLUSTER=1)")
		}
		t.Skip(reason)
	}
	return p
}

// stackVars is what the intel-pip profile gives a job, over this
// machine's PATH.
func stackVars(p string) map[string]string {
	v := wheelVars(p)
	v["PATH"] = p + "/bin/libfabric:" + p + "/bin:" + os.Getenv("PATH")
	return v
}

// stackEnv is a System-like Env: the loader cache and default
// directories as a job has them.
func stackEnv(vars map[string]string) *Env {
	env := realEnv(vars, intelProfile(), true)
	env.LibDirs = DefaultLibDirs
	return env
}

func TestIntelStackReal(t *testing.T) {
	p := intelPrefix(t)
	start := time.Now()
	got := runIntel(stackEnv(stackVars(p)))
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the checks took %v: want seconds", d)
	}
	checkWant(t, got, map[string]wantResult{
		"intel-mpi": {OK, []string{"Intel MPI 2021.18.1 Build ", "libmpi.so.12 from " + p + "/lib (LD_LIBRARY_PATH, wheel impi-rt 2021.18.1) loads",
			"mpirun (" + p + "/bin/mpirun) is the same build"}, ""},
		"oneccl":    {OK, []string{"oneCCL 2021.16.1 (the library's version string Gold-2021.16.1 ", "wheel oneccl-cpu 2021.16.1) loads"}, ""},
		"libfabric": {OK, []string{"libfabric 2.", "from " + p + "/lib (LD_LIBRARY_PATH): providers ", "tcp", "FI_PROVIDER=tcp is among them"}, ""},
	})
	for _, r := range got {
		t.Logf("%s %s: %s", r.Status, r.Name, r.Message)
	}

	// A provider libfabric does not have here (efa: no such device).
	vars := stackVars(p)
	vars["FI_PROVIDER"] = "efa"
	checkWant(t, runIntel(stackEnv(vars)), map[string]wantResult{
		"libfabric": {Fail, []string{"FI_PROVIDER=efa, but libfabric ", "has no efa provider here"}, "FI_PROVIDER=tcp"},
	})
	// oneCCL's mpi transport without I_MPI_ROOT.
	vars = stackVars(p)
	delete(vars, "I_MPI_ROOT")
	vars["CCL_ATL_TRANSPORT"] = "mpi"
	checkWant(t, runIntel(stackEnv(vars)), map[string]wantResult{
		"oneccl": {Fail, []string{cclMPIRootError}, "export I_MPI_ROOT="},
	})
}

// oneccl-cpu 2022.1.2, the real wheel when pip reaches the index within a
// minute (6 MB, then pip's cache), else a libccl.so.1 built to need libccl.so.2 as it does.
func TestIntelStackBrokenCCL(t *testing.T) {
	p := intelPrefix(t)
	broken, wheel := t.TempDir(), "oneccl-cpu 2022.1.2"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	// pip --prefix lays the wheel out as in a venv (lib/, lib/pythonX.Y/site-packages), without
	// making one.
	venv := exec.CommandContext(ctx, "python3", "-m", "pip", "install", "-q", "--no-input", "--disable-pip-version-check",
		"--root-user-action=ignore", "--no-warn-script-location", "--no-deps", "--timeout", "15", "--prefix", broken, "oneccl-cpu==2022.1.2")
	venv.Stdout, venv.Stderr = &out, &out
	if err := venv.Run(); err != nil {
		t.Logf("no oneccl-cpu 2022.1.2 from pip (%v: %s): a libccl.so.1 that needs libccl.so.2 instead", err, lastLine(out.String()))
		broken, wheel = fakeStack(t, stackOpts{cclNeeds: true}), "oneccl-cpu 2022.1.2"
	}
	vars := stackVars(p)
	vars["LD_LIBRARY_PATH"] = broken + "/lib:" + p + "/lib"
	checkWant(t, runIntel(stackEnv(vars)), map[string]wantResult{
		"oneccl": {Fail, []string{"libccl.so.1 from " + broken + "/lib (LD_LIBRARY_PATH, wheel " + wheel + ") cannot be loaded: it needs libccl.so.2, not found"},
			"pip install oneccl-cpu==2021.16.1"},
		"intel-mpi": {OK, []string{"Intel MPI 2021.18.1"}, ""},
	})
}

// The launcher of one install, the library of another: a real other
// install when BATCHKIT_TEST_IMPI_OTHER names one (a venv with impi-rt
// 2021.16.1), else a copy of the real libmpi.so.12 whose build is
// rewritten in place.
func TestIntelStackMismatch(t *testing.T) {
	p := intelPrefix(t)
	vars := stackVars(p)
	want := wantResult{Fail, []string{"mpirun from ", "is Intel MPI ", "but libmpi.so.12 from ", ": put one install first on PATH and LD_LIBRARY_PATH"}, "export "}
	if other := os.Getenv("BATCHKIT_TEST_IMPI_OTHER"); other != "" {
		vars["PATH"] = other + "/bin:" + vars["PATH"]
		want.msg = append(want.msg, "mpirun from "+other+"/bin is Intel MPI 2021.16 Build ", "libmpi.so.12 from "+p+"/lib is 2021.18.1 Build ")
	} else {
		lib := filepath.Join(t.TempDir(), "lib")
		mkdir(t, lib)
		b, err := os.ReadFile(filepath.Join(p, "lib", "libmpi.so.12"))
		if err != nil {
			t.Fatal(err)
		}
		v, ok := impiLibVersion(b)
		if !ok {
			t.Fatal("no version in the real libmpi.so.12")
		}
		old := []byte(v.Build + " (id: " + v.ID + ")")
		b = bytes.Replace(b, old, []byte(strings.Repeat("1", len(v.Build))+" (id: "+strings.Repeat("0", len(v.ID))+")"), -1)
		writeFile(t, filepath.Join(lib, "libmpi.so.12"), string(b), 0o755)
		vars["LD_LIBRARY_PATH"] = lib + ":" + vars["LD_LIBRARY_PATH"]
		want.msg = append(want.msg, "mpirun from "+p+"/bin is Intel MPI "+v.String(), "libmpi.so.12 from "+lib+" is "+v.Version+" Build 11111111")
	}
	checkWant(t, runIntel(stackEnv(vars)), map[string]wantResult{"intel-mpi": want})
}

// impi-rt with a file gone: a prefix of links to the real wheel's files,
// one missing.
func TestIntelStackHalfInstalled(t *testing.T) {
	p := intelPrefix(t)
	recs, _ := filepath.Glob(filepath.Join(p, "lib", "python*", "site-packages", "impi_rt-*.dist-info", "RECORD"))
	if len(recs) != 1 {
		t.Fatalf("impi_rt's RECORD in %s: %v", p, recs)
	}
	files, err := recordFiles(recs[0], p)
	if err != nil {
		t.Fatal(err)
	}
	half := t.TempDir()
	for _, f := range files { // RECORD lists itself
		r := rel(p, f)
		if r == "bin/mpiexec.hydra" || strings.HasPrefix(r, "..") {
			continue
		}
		mkdir(t, filepath.Join(half, filepath.Dir(r)))
		if err := os.Symlink(f, filepath.Join(half, r)); err != nil {
			t.Fatal(err)
		}
	}
	vars := stackVars(p)
	vars["LD_LIBRARY_PATH"] = half + "/lib:" + p + "/lib"
	checkWant(t, runIntel(stackEnv(vars)), map[string]wantResult{
		"intel-mpi": {Fail, []string{"impi-rt 2021.18.1 in " + half + " is half-installed: bin/mpiexec.hydra is missing"},
			half + "/bin/pip install --force-reinstall --no-deps impi-rt==2021.18.1"},
	})
}
