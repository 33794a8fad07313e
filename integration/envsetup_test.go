package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// toolsDir is a PATH directory with only the programs the fake oneAPI
// tree and the ranks need: MPICH's Hydra under its own names, but no
// program called mpirun, so the launcher can only come from setvars.sh.
func toolsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	for _, tool := range []string{"bash", "sh", "env", "dirname", "basename", "grep", "cat", "mpirun.mpich", "mpiexec.hydra", "hydra_pmi_proxy"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			requireOrSkip(t, tool+" not found")
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// From a bare login shell (no oneAPI, no mpirun on PATH), `batchkit mpirun
// --profile` sources the profile's setvars.sh and oneCCL vars.sh once,
// finds the mpirun that setvars.sh put on PATH (a wrapper around MPICH's
// Hydra standing in for Intel MPI's), and every rank sees what the scripts
// and the profile set.
func TestMpirunSourcesProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real MPI launcher")
	}
	root, err := filepath.Abs("../envsetup/testdata/oneapi")
	if err != nil {
		t.Fatal(err)
	}
	tools := toolsDir(t)
	// CCL_CONFIGURATION: the script sets it, the profile's value wins.
	prof := fakeOneAPIProfile(t, filepath.Join(t.TempDir(), "fake-oneapi.toml"), root,
		"CCL_WORKER_COUNT = \"1\"\nCCL_CONFIGURATION = \"cpu_gpu_dpcpp\"\n")
	env := bareEnv(tools)
	if _, err := exec.LookPath(filepath.Join(tools, "mpirun")); err == nil {
		t.Fatal("the test PATH has an mpirun")
	}
	out := runEnv(t, env, bin, "mpirun", "--profile", prof, "-n", "2", "--",
		"sh", "-c", `echo "rank=$RANK ccl=$CCL_ROOT conf=$CCL_CONFIGURATION mpi=$I_MPI_ROOT workers=$CCL_WORKER_COUNT done=$SETVARS_COMPLETED"`)
	for rank := 0; rank < 2; rank++ {
		want := fmt.Sprintf("rank=%d ccl=%s/ccl/latest conf=cpu_gpu_dpcpp mpi=%s/mpi/latest workers=1 done=1", rank, root, root)
		if !strings.Contains(out, want+"\n") {
			t.Errorf("no line %q in the ranks' output:\n%s", want, out)
		}
	}
}

// fakeOneAPIProfile writes a profile to path whose Intel MPI is the mpirun
// that the fake oneAPI tree at root puts on PATH, sourcing its setvars.sh
// and oneCCL vars.sh, with vars (TOML lines) in [env.vars].
func fakeOneAPIProfile(t *testing.T, path, root, vars string) string {
	t.Helper()
	text := fmt.Sprintf(`description = "test: a fake oneAPI tree, Intel MPI's mpirun from setvars.sh"
[mpi]
flavor = "intelmpi"
launcher = "mpirun"
binary = "mpirun"
[env]
source = [
  { script = %q, args = ["--force"] },
  { script = %q, args = ["--ccl-configuration=cpu"] },
]
[env.vars]
%s`, root+"/setvars.sh", root+"/ccl/latest/env/vars.sh", vars)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// bareEnv is the test environment of a shell that sourced nothing (no
// oneAPI variables, nor the drop prefixes) whose PATH is just tools.
func bareEnv(tools string, drop ...string) []string {
	drop = append(drop, "PATH=", "SETVARS_", "CCL_", "I_MPI_")
	var env []string
	for _, kv := range localEnv() {
		if !slices.ContainsFunc(drop, func(p string) bool { return strings.HasPrefix(kv, p) }) {
			env = append(env, kv)
		}
	}
	return append(env, "PATH="+tools)
}
