package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/doctor"
)

// These tests run doctor against this machine: Debian's python3-torch at
// /usr/bin/python3, no oneCCL, Open MPI's mpirun.openmpi.

func needSystemTorch(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs Python")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		t.Skip("/usr/bin/python3 cannot import torch (Debian's python3-torch): ", err)
	}
}

// doctorRun runs 'batchkit doctor --format json ARGS' and returns the
// results by name and the exit code.
func doctorRun(t *testing.T, args ...string) (map[string]doctor.Result, int) {
	t.Helper()
	t.Setenv("PYTHONDONTWRITEBYTECODE", "1")
	var stdout, stderr bytes.Buffer
	// A generous timeout unless the test sets one: importing torch takes
	// over 5 s on this shared machine under load.
	if !slices.Contains(args, "--timeout") {
		args = append([]string{"--timeout", "30s"}, args...)
	}
	code := Main(append([]string{"batchkit", "doctor", "--format", "json"}, args...), &stdout, &stderr)
	var report struct{ Checks []doctor.Result }
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("doctor %v: exit %d, stdout %q, stderr %q: %v", args, code, stdout.String(), stderr.String(), err)
	}
	got := map[string]doctor.Result{}
	for _, r := range report.Checks {
		got[r.Name] = r
	}
	if want := exitCodeOf(report.Checks); code != want {
		t.Errorf("doctor %v: exit %d, want %d for %+v", args, code, want, report.Checks)
	}
	return got, code
}

func exitCodeOf(rs []doctor.Result) int {
	if doctor.Failed(rs) {
		return exitFailure
	}
	return exitOK
}

func TestDoctorSystemTorch(t *testing.T) {
	needSystemTorch(t)
	t.Setenv("PYTHONPATH", "")
	got, _ := doctorRun(t, "--profile", "local", "--python", "/usr/bin/python3")
	if r := got["torch"]; r.Status != doctor.OK || !strings.Contains(r.Message, "torch 1.13.") {
		t.Errorf("torch = %+v, want ok with torch 1.13.x", r)
	}
	want := doctor.Result{Name: "oneccl-bindings", Status: doctor.Skip,
		Message: "oneccl_bindings_for_pytorch is not installed for /usr/bin/python3; profile local does not use oneCCL",
		Fix:     "for oneCCL collectives: pip install oneccl_bind_pt==1.13.0 --extra-index-url https://pytorch-extension.intel.com/release-whl/stable/cpu/us/"}
	if diff := cmp.Diff(want, got["oneccl-bindings"]); diff != "" {
		t.Errorf("oneccl-bindings (-want +got):\n%s", diff)
	}
	for _, name := range []string{"profile", "python", "topology"} {
		if got[name].Status != doctor.OK {
			t.Errorf("%s = %+v, want ok", name, got[name])
		}
	}
	// Open MPI's profile, no Intel stack in the environment: no Intel lines.
	for _, name := range []string{"intel-mpi", "oneccl", "libfabric"} {
		if r, ok := got[name]; ok {
			t.Errorf("%s = %+v under profile local, want no line", name, r)
		}
	}

	// A profile whose collectives are oneCCL's needs the bindings: intel-oneccl
	// with a stand-in for oneAPI's setvars.sh, since the checks of Python run
	// in the environment the profile's scripts leave.
	mpirunPath := intelSite(t)
	got, code := doctorRun(t, "--profile", "intel-site", "--python", "/usr/bin/python3")
	if r := got["oneccl-bindings"]; r.Status != doctor.Fail || !strings.HasPrefix(r.Fix, "pip install oneccl_bind_pt==1.13.0 ") {
		t.Errorf("oneccl-bindings under intel-oneccl = %+v, want fail with the pip fix", r)
	}
	if code != exitFailure {
		t.Errorf("exit %d, want 1", code)
	}
	// The mpirun the script put first on PATH, not this machine's Open MPI.
	if r := got["mpirun"]; r.Status != doctor.OK || !strings.Contains(r.Message, "mpirun → "+mpirunPath+": Intel(R) MPI Library") {
		t.Errorf("mpirun = %+v, want ok with %s", r, mpirunPath)
	}
}

// intelSite is the profile intel-site: intel-oneccl with a stand-in for
// oneAPI's setvars.sh, which puts an Intel MPI mpirun (answering --version
// like Intel's) first on PATH. It returns that mpirun's path.
func intelSite(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	mpirun := filepath.Join(bin, "mpirun")
	writeScript(t, mpirun, "#!/bin/sh\necho 'Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)'\n")
	setvars := filepath.Join(dir, "oneapi-vars.sh") // setvars.sh would need --force
	writeScript(t, setvars, "export PATH="+bin+":$PATH\n")
	writeScript(t, filepath.Join(dir, "intel-site.toml"), "extends = \"intel-oneccl\"\n[env]\nsource = [{ script = \""+setvars+"\" }]\n")
	t.Setenv("BATCHKIT_PROFILE_PATH", dir)
	return mpirun
}

// Without oneAPI (this machine), intel-oneccl's setvars.sh is missing: the
// checks that run in the environment it would leave skip instead of
// judging doctor's own (Open MPI's mpirun is not what a job would find).
func TestDoctorIntelWithoutOneAPI(t *testing.T) {
	if _, err := os.Stat("/opt/intel/oneapi/setvars.sh"); err == nil {
		t.Skip("oneAPI is installed here")
	}
	got, code := doctorRun(t, "--profile", "intel-oneccl")
	if code != exitFailure {
		t.Errorf("exit %d, want 1", code)
	}
	statuses := map[string]doctor.Status{}
	for _, name := range []string{"env-scripts", "mpirun", "intel-mpi", "oneccl", "libfabric", "python", "torch", "oneccl-bindings", "ipex"} {
		statuses[name] = got[name].Status
	}
	want := map[string]doctor.Status{"env-scripts": doctor.Fail, "mpirun": doctor.Skip,
		"intel-mpi": doctor.Skip, "oneccl": doctor.Skip, "libfabric": doctor.Skip,
		"python": doctor.Skip, "torch": doctor.Skip, "oneccl-bindings": doctor.Skip, "ipex": doctor.Skip}
	if diff := cmp.Diff(want, statuses); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if r := got["env-scripts"]; r.Message != "/opt/intel/oneapi/setvars.sh does not exist" {
		t.Errorf("env-scripts = %+v", r)
	}
}

// The real Intel stack of scripts/intel-stack.sh, in the environment the
// intel-pip profile gives a job (set here in doctor's own): the versions
// of the library, the launcher and oneCCL, and libfabric's providers. The
// broken cases are doctor's package tests.
func TestDoctorIntelStack(t *testing.T) {
	p := os.Getenv("BATCHKIT_INTEL_PREFIX")
	if p == "" {
		p = "/opt/batchkit/intel"
	}
	if _, err := os.Stat(filepath.Join(p, "lib", "libccl.so.1")); err != nil {
		if os.Getenv("BATCHKIT_REQUIRE_CLUSTER") == "1" {
			t.Fatalf("no Intel stack in %s (scripts/intel-stack.sh install; BATCHKIT_REQUIRE_CLUSTER=1)", p)
		}
		t.Skipf("no Intel stack in %s (scripts/intel-stack.sh install)", p)
	}
	dir := t.TempDir()
	writeScript(t, filepath.Join(dir, "wheels.toml"), `description = "the Intel wheels, set up by the caller"
[mpi]
flavor = "intelmpi"
launcher = "mpirun"
binary = "mpirun"
[env.vars]
FI_PROVIDER = "tcp"
CCL_WORKER_COUNT = "1"
`)
	t.Setenv("BATCHKIT_PROFILE_PATH", dir)
	t.Setenv("PATH", p+"/bin/libfabric:"+p+"/bin:"+os.Getenv("PATH"))
	t.Setenv("LD_LIBRARY_PATH", p+"/lib")
	t.Setenv("FI_PROVIDER_PATH", p+"/lib")
	t.Setenv("I_MPI_ROOT", p)
	t.Setenv("CCL_ROOT", p)
	got, _ := doctorRun(t, "--profile", "wheels", "--python", "/usr/bin/python3")
	for name, in := range map[string]string{
		"intel-mpi": "Intel MPI 2021.18.1 Build ",
		"oneccl":    "oneCCL 2021.16.1 (the library's version string Gold-2021.16.1 ",
		"libfabric": "FI_PROVIDER=tcp is among them",
	} {
		if r := got[name]; r.Status != doctor.OK || !strings.Contains(r.Message, in) {
			t.Errorf("%s = %+v, want ok with %q", name, r, in)
		}
	}
	if r := got["intel-mpi"]; !strings.Contains(r.Message, "mpirun ("+p+"/bin/mpirun) is the same build") {
		t.Errorf("intel-mpi = %+v, want the launcher compared", r)
	}
}

// The trap: python3 on PATH is not the interpreter with torch.
func TestDoctorPythonOnPathWithoutTorch(t *testing.T) {
	needSystemTorch(t)
	dir := t.TempDir()
	// -S skips site-packages, and Debian's torch with them.
	writeScript(t, filepath.Join(dir, "python3"), "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n")
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("PYTHONPATH", "")
	got, _ := doctorRun(t, "--profile", "local")
	if r := got["python"]; r.Status != doctor.Warn || !strings.Contains(r.Message, "/usr/bin/python3 has torch 1.13.") {
		t.Errorf("python = %+v, want a warning naming /usr/bin/python3 as the one with torch", r)
	}
	if r := got["torch"]; r.Status != doctor.Warn || !strings.Contains(r.Fix, "--python /usr/bin/python3") {
		t.Errorf("torch = %+v, want a warning pointing at /usr/bin/python3", r)
	}
}

// Stand-in packages that only carry a version, first on PYTHONPATH,
// against the real torch 1.13 or a stand-in torch.
func TestDoctorVersionMatching(t *testing.T) {
	needSystemTorch(t)
	py, err := filepath.Abs("testdata/py")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dirs     []string
		bindings doctor.Status
		ipex     doctor.Status
		in       string // in the bindings' or IPEX's message or fix
	}{
		{[]string{"bind-1.13.0"}, doctor.OK, doctor.Skip, "oneccl_bindings_for_pytorch 1.13.0 matches torch 1.13."},
		{[]string{"torch_ccl-1.13.0"}, doctor.OK, doctor.Skip, "torch_ccl 1.13.0 matches torch 1.13."},
		{[]string{"bind-1.12.100"}, doctor.Fail, doctor.Skip, "Mismatch in kernel C++ signatures"},
		{[]string{"torch-2.1.0", "bind-2.1.100"}, doctor.OK, doctor.Skip, "2.1.100+xpu matches torch 2.1.0a0+cxx11.abi"},
		{[]string{"torch-2.1.1", "bind-2.1.100"}, doctor.Fail, doctor.Skip, "is built for torch 2.1.0, torch is 2.1.1+cpu"},
		{[]string{"bind-1.13.0", "ipex-1.13.100"}, doctor.OK, doctor.OK, "intel_extension_for_pytorch 1.13.100+cpu matches torch 1.13."},
		{[]string{"ipex-2.1.10"}, doctor.Skip, doctor.Fail, "intel_extension_for_pytorch 2.1.10+xpu is for torch 2.1.*"},
		{[]string{"torch-2.1.0", "ipex-2.1.10"}, doctor.Skip, doctor.OK, "matches torch 2.1.0a0+cxx11.abi"},
	} {
		t.Run(strings.Join(tc.dirs, "+"), func(t *testing.T) {
			var path []string
			for _, d := range tc.dirs {
				path = append(path, filepath.Join(py, d))
			}
			t.Setenv("PYTHONPATH", strings.Join(path, string(os.PathListSeparator)))
			got, _ := doctorRun(t, "--profile", "local", "--python", "/usr/bin/python3")
			b, x := got["oneccl-bindings"], got["ipex"]
			if b.Status != tc.bindings || x.Status != tc.ipex {
				t.Errorf("oneccl-bindings = %+v, ipex = %+v, want %s, %s", b, x, tc.bindings, tc.ipex)
			}
			if all := b.Message + b.Fix + x.Message + x.Fix; !strings.Contains(all, tc.in) {
				t.Errorf("want %q in %+v, %+v", tc.in, b, x)
			}
		})
	}
}

// Probes that never answer: doctor still ends in its budget, naming them.
func TestDoctorHangingProbes(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for timeouts")
	}
	dir := t.TempDir()
	writeScript(t, filepath.Join(dir, "slowpython"), "#!/bin/sh\nsleep 60\n")
	writeScript(t, filepath.Join(dir, "mpirun.openmpi"), "#!/bin/sh\nsleep 60 & wait\n")
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	start := time.Now()
	got, code := doctorRun(t, "--profile", "local", "--python", filepath.Join(dir, "slowpython"), "--timeout", "1s")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("doctor took %v with a 1s timeout", d)
	}
	if code != exitFailure {
		t.Errorf("exit %d, want 1", code)
	}
	for name, in := range map[string]string{
		"python": filepath.Join(dir, "slowpython") + " (probe of torch, oneCCL bindings, IPEX): timed out after 1s",
		"mpirun": filepath.Join(dir, "mpirun.openmpi") + " --version: timed out after 1s",
	} {
		if r := got[name]; r.Status != doctor.Fail || r.Message != in {
			t.Errorf("%s = %+v, want fail %q", name, r, in)
		}
	}
}

// Tools that print what a terminal obeys, print without end or leave a
// child holding their output: doctor ends quickly, names what the tool
// did, kills what it left, and neither its text nor its JSON holds a byte
// a terminal acts on.
func TestDoctorHostileTools(t *testing.T) {
	for _, tc := range []struct {
		name, body, controller string
	}{
		{"terminal escapes", `printf '\033]0;PWNED title\007\033[2J\033[HSlurmctld(primary) at ctl is DOWN\r\n'`,
			`slurmctld does not answer: \x1b]0;PWNED title\a\x1b[2J\x1b[HSlurmctld(primary) at ctl is DOWN`},
		{"invalid UTF-8 and NUL", `printf 'bad \377\376 utf8 \000 nul\n'`, `slurmctld does not answer: bad \xff\xfe utf8 \x00 nul`},
		{"prints without end", `exec yes 'Slurmctld(primary) at ctl is UP'`, "scontrol ping: printed more than 1 MiB on stdout: stopped"},
		{"leaves a child holding its output", "sleep 60 &\necho $! >> \"$0.pid\"\necho 'Slurmctld(primary) at ctl is UP'",
			"scontrol ping: exited, but a process it left behind held its output open (killed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tools := []string{"scontrol", "mpirun.openmpi", "python3"}
			for _, name := range tools {
				writeScript(t, filepath.Join(dir, name), "#!/bin/sh\n"+tc.body+"\n")
			}
			t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
			args := []string{"--profile", "local", "--python", filepath.Join(dir, "python3"), "--timeout", "5s"}
			start := time.Now()
			got, _ := doctorRun(t, args...)
			// The budget is 3 timeouts; a stopped or killed tool takes none.
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("doctor took %v", d)
			}
			if r := got["slurm-controller"]; !strings.Contains(r.Message, tc.controller) {
				t.Errorf("slurm-controller = %s %q, want it to contain %q", r.Status, r.Message, tc.controller)
			}
			for name, r := range got {
				for _, s := range []string{r.Message, r.Fix} {
					if strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) || len(s) > 2048 {
						t.Errorf("%s: %d bytes, not one printable line: %q", name, len(s), s)
					}
				}
			}
			var stdout, stderr bytes.Buffer
			Main(append([]string{"batchkit", "doctor"}, args...), &stdout, &stderr)
			out := stdout.Bytes()
			if i := bytes.IndexFunc(out, func(r rune) bool { return r != '\n' && !strconv.IsPrint(r) }); i >= 0 || !utf8.Valid(out) || len(out) > 16<<10 {
				t.Errorf("doctor's text (%d bytes) has a byte a terminal acts on at %d: %q", len(out), i, out)
			}
			for _, name := range tools {
				b, err := os.ReadFile(filepath.Join(dir, name+".pid"))
				if err != nil {
					continue
				}
				for _, pid := range strings.Fields(string(b)) { // from both runs
					if alive(pid) {
						t.Errorf("%s's child %s is alive", name, pid)
					}
				}
			}
		})
	}
}

// alive: the process runs, and is not a zombie waiting for init; it gets
// a few seconds to die.
func alive(pid string) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			return false
		}
	}
	if n, err := strconv.Atoi(pid); err == nil {
		syscall.Kill(n, syscall.SIGKILL) // not left running after the test
	}
	return true
}

func TestDoctorUsage(t *testing.T) {
	for _, args := range [][]string{{"--format", "xml"}, {"extra"}, {"--timeout", "0s"}} {
		var stdout, stderr bytes.Buffer
		if code := Main(append([]string{"batchkit", "doctor"}, args...), &stdout, &stderr); code != exitUsage {
			t.Errorf("doctor %v: exit %d, want 2 (stderr %q)", args, code, stderr.String())
		}
	}
}

func writeScript(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
}
