package integration

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A batch job from a bare submit shell (no oneAPI, no mpirun on PATH) with
// a profile that sources the fake oneAPI tree's setvars.sh and oneCCL
// vars.sh: the generated script sources them on the first node, finds the
// mpirun that setvars.sh put on PATH (a wrapper around MPICH's Hydra
// standing in for Intel MPI's), and every rank on both nodes sees what
// the scripts set, the profile's variables over them (CCL_CONFIGURATION),
// and the user's exported value over the profile's (CCL_WORKER_COUNT).
func TestSbatchSourcesProfile(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	// A copy the job can read wherever the repository is checked out.
	root := filepath.Join(dir, "oneapi")
	copyTree(t, "../envsetup/testdata/oneapi", root)
	root, err := filepath.EvalSymlinks(root) // setvars.sh finds itself with pwd -P
	if err != nil {
		t.Fatal(err)
	}
	tools := toolsDir(t)
	for _, tool := range []string{"sbatch", "srun"} { // srun: Hydra's -bootstrap slurm
		p, err := exec.LookPath(tool)
		if err != nil {
			requireOrSkip(t, tool+" not found")
		}
		if err := os.Symlink(p, filepath.Join(tools, tool)); err != nil {
			t.Fatal(err)
		}
	}
	const quoted = `it's "q" $HOME \ $(touch PWNED)`
	prof := fakeOneAPIProfile(t, filepath.Join(dir, "fake-oneapi.toml"), root,
		fmt.Sprintf("CCL_CONFIGURATION = \"cpu_gpu_dpcpp\"\nCCL_WORKER_COUNT = \"1\"\nBK_QUOTED = %q\n", quoted))
	env := append(bareEnv(tools, "BK_"), "CCL_WORKER_COUNT=2") // the user's value
	out := filepath.Join(dir, "job.out")
	runEnvTimeout(t, 3*time.Minute, env, bin, "sbatch", "--profile", prof, "--wait", "-N", "2", "--ntasks-per-node", "1",
		"-o", out, "--sbatch-arg", "--chdir="+dir, "--",
		"sh", "-c", `echo "rank=$RANK ccl=$CCL_ROOT conf=$CCL_CONFIGURATION mpi=$I_MPI_ROOT workers=$CCL_WORKER_COUNT done=$SETVARS_COMPLETED mpirun=$(command -v mpirun) quoted=$BK_QUOTED"`)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for rank := 0; rank < 2; rank++ {
		want := fmt.Sprintf("rank=%d ccl=%s/ccl/latest conf=cpu_gpu_dpcpp mpi=%s/mpi/latest workers=2 done=1 mpirun=%s/mpi/latest/bin/mpirun quoted=%s",
			rank, root, root, root, quoted)
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf("no line %q in the job's output:\n%s", want, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "PWNED")); err == nil {
		t.Error("a profile variable's value executed a command")
	}
}

// A job whose environment script fails stops before the launch line, and
// its output says which script.
func TestSbatchSourceFails(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	script := filepath.Join(dir, "fails.sh")
	if err := os.WriteFile(script, []byte("echo ':: ERROR: a component failed' >&2\nreturn 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prof := filepath.Join(dir, "fails.toml")
	text := fmt.Sprintf("extends = \"local\"\n[env]\nsource = [{ script = %q }]\n", script)
	if err := os.WriteFile(prof, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "job.out")
	cmd := exec.Command(bin, "sbatch", "--profile", prof, "--wait", "--launcher", "srun", "--flavor", "mpich", "-N", "1",
		"-o", out, "--", "sh", "-c", "echo launched")
	cmd.Env = localEnv()
	msg, err := cmd.CombinedOutput()
	b, _ := os.ReadFile(out)
	if err == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("batchkit sbatch --wait: %v, want exit 1\n%s\njob output:\n%s", err, msg, b)
	}
	if want := "batchkit: sourcing " + script + " failed (exit 3): stopping the job\n"; !strings.Contains(string(b), want) {
		t.Errorf("job output lacks %q:\n%s", want, b)
	}
	if strings.Contains(string(b), "launched") {
		t.Errorf("the launch line ran after a failed source:\n%s", b)
	}
}

// copyTree copies the regular files under src to dst, directories 0755 and
// files readable by all, their execute bits kept.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			return os.Chmod(target, 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(target, b, 0o644|info.Mode().Perm()&0o111); err != nil {
			return err
		}
		return os.Chmod(target, 0o644|info.Mode().Perm()&0o111)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// runEnvTimeout is runEnv with a deadline of its own, for a job that may
// wait in the queue behind other engineers' jobs.
func runEnvTimeout(t *testing.T, timeout time.Duration, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %q: %v\nstdout:\n%s\nstderr:\n%s", name, args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
