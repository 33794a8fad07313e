package doctor

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/profile"
)

func TestIMPILibVersion(t *testing.T) {
	pad := func(s string, n int) string { return s + strings.Repeat("\x00", n-len(s)) }
	for _, tc := range []struct {
		name string
		data string
		want IMPIVersion
		ok   bool
	}{
		// 2021.18.1's libmpi.so.12: 32-byte fields in .data.
		{"2021.18", "\xff\xff\x00\x00" + pad("2021.18.1", 32) + pad("20260626 (id: b44796a)", 32) + pad("release", 16),
			IMPIVersion{"2021.18.1", "20260626", "b44796a"}, true},
		// 2021.16's: the version without its update, other padding.
		{"2021.16", "\x00\x00\x00\x00\x00\x00\x00" + pad("2021.16", 31) + pad("20250722 (id: c37a540)", 40),
			IMPIVersion{"2021.16", "20250722", "c37a540"}, true},
		// An id elsewhere (a format string) before the real one.
		{"format first", "x\x00%s (id: %s)\x00" + pad("2021.18.1", 32) + "20260626 (id: b44796a)\x00",
			IMPIVersion{"2021.18.1", "20260626", "b44796a"}, true},
		{"no version before the build", "\x00" + pad("hello", 32) + "20260626 (id: b44796a)\x00", IMPIVersion{}, false},
		{"at the start", "20260626 (id: b44796a)\x00", IMPIVersion{}, false},
		{"nothing", "MPICH Version:\x004.0.2\x00", IMPIVersion{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := impiLibVersion([]byte(tc.data))
			if got != tc.want || ok != tc.ok {
				t.Errorf("impiLibVersion = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestIMPILauncherVersion(t *testing.T) {
	got, ok := impiLauncherVersion("Intel(R) MPI Library for Linux* OS, Version 2021.16 Build 20250722 (id: c37a540)\nCopyright 2003-2025, Intel Corporation.\n")
	if want := (IMPIVersion{"2021.16", "20250722", "c37a540"}); !ok || got != want {
		t.Errorf("got %+v, %v; want %+v", got, ok, want)
	}
	if got.String() != "2021.16 Build 20250722 (id: c37a540)" {
		t.Errorf("String() = %q", got)
	}
	if _, ok := impiLauncherVersion("mpirun (Open MPI) 4.1.4"); ok {
		t.Error("Open MPI's version read as Intel MPI's")
	}
	a, b := IMPIVersion{"2021.18.1", "20260626", "b44796a"}, IMPIVersion{"2021.18.1", "20260626", ""}
	if !a.Same(b) || a.Same(IMPIVersion{"2021.16", "20250722", "c37a540"}) {
		t.Error("Same")
	}
}

func TestCCLLibVersion(t *testing.T) {
	for data, want := range map[string]string{
		"x\x00Gold-2021.16.1 2025-08-08T 06:35:17Z (HEAD/1ab266d4e)\x00y":                 "2021.16.1",
		"\x00Gold-2022.1.0 2026-08-19T 06:08:47Z (release/ccl_2022.1.2-gold/8ec96fc)\x00": "2022.1.0",
		"\x00Gold-2021.16.1 was\x00": "",
		"CCL_ATL_TRANSPORT\x00value of %s changed to be %s (default:%s)\x00Gold-%d.%d.%d\x00": "",
	} {
		v, full, ok := cclLibVersion([]byte(data))
		if v != want || ok != (want != "") || (ok && !strings.HasPrefix(full, "Gold-"+want)) {
			t.Errorf("cclLibVersion(%q) = %q, %q, %v; want %q", data, v, full, ok, want)
		}
	}
}

func TestParsers(t *testing.T) {
	ldc := "1234 libs found in cache `/etc/ld.so.cache'\n\tlibmpi.so.12 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libmpi.so.12\n" +
		"\tlibfabric.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libfabric.so.1\n\tlibfabric.so.1 (libc6) => /lib32/libfabric.so.1\n"
	if diff := cmp.Diff(map[string][]string{
		"libmpi.so.12":   {"/usr/lib/x86_64-linux-gnu/libmpi.so.12"},
		"libfabric.so.1": {"/lib/x86_64-linux-gnu/libfabric.so.1", "/lib32/libfabric.so.1"},
	}, parseLdconfig(ldc)); diff != "" {
		t.Errorf("parseLdconfig (-want +got):\n%s", diff)
	}
	ldd := "\tlinux-vdso.so.1 (0x00007f381cae1000)\n\tlibccl.so.2 => not found\n\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007f)\n\tlibx.so => not found\n"
	if diff := cmp.Diff([]string{"libccl.so.2", "libx.so"}, lddMissing(ldd)); diff != "" {
		t.Errorf("lddMissing (-want +got):\n%s", diff)
	}
	fi := "psm2:\n    version: 204.0\nverbs:\n    version: 204.0\nverbs:\n    version: 204.0\nofi_rxm:\n    version: 204.0\ntcp:\n    version: 204.0\n"
	if diff := cmp.Diff([]string{"psm2", "verbs", "ofi_rxm", "tcp"}, parseProviders(fi)); diff != "" {
		t.Errorf("parseProviders (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"verbs", "ofi_rxm", "tcp"}, wantedProviders("verbs;ofi_rxm, tcp,^shm")); diff != "" {
		t.Errorf("wantedProviders (-want +got):\n%s", diff)
	}
	provs := []string{"ofi_rxm", "tcp"}
	if !hasProvider(provs, "rxm") || !hasProvider(provs, "ofi_rxm") || !hasProvider(provs, "tcp") || hasProvider(provs, "cxi") {
		t.Error("hasProvider")
	}
	if got := fabricVersion("fi_info: 2.4.0\nlibfabric: 2.4.0-impi\nlibfabric api: 2.4\n"); got != " 2.4.0-impi" {
		t.Errorf("fabricVersion = %q", got)
	}
}

// TestPinnedWheels: the versions the fixes name are scripts/intel-wheels.txt's.
func TestPinnedWheels(t *testing.T) {
	f, err := os.Open("../scripts/intel-wheels.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pins := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=="); ok && !strings.HasPrefix(name, "#") {
			pins[name] = v
		}
	}
	if pins["impi-rt"] != pinnedIMPI || pins["oneccl-cpu"] != pinnedCCL {
		t.Errorf("pins %v, doctor names impi-rt %s and oneccl-cpu %s", pins, pinnedIMPI, pinnedCCL)
	}
}

// Fake Intel stacks: real ELF libraries built with cc, carrying the
// version strings where the real ones have them, a fi_info program, the
// wheels' metadata, and an mpirun script answering --version.

const (
	build18 = "2021.18.1|20260626 (id: b44796a)"
	build16 = "2021.16|20250722 (id: c37a540)"
	ccl16   = "Gold-2021.16.1 2025-08-08T 06:35:17Z (HEAD/1ab266d4e)"
)

var objs struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if objs.dir != "" {
		os.RemoveAll(objs.dir)
	}
	os.Exit(code)
}

// compiled is a directory of the objects every fake stack copies, built
// once per test binary; the test skips without cc.
func compiled(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no cc to build fake libraries")
	}
	if _, err := exec.LookPath("ldd"); err != nil {
		t.Skip("no ldd")
	}
	objs.once.Do(func() {
		dir, err := os.MkdirTemp("", "doctor-intel-")
		if err != nil {
			objs.err = err
			return
		}
		objs.dir = dir
		for _, v := range []string{build18, build16} {
			ver, build, _ := strings.Cut(v, "|")
			src := fmt.Sprintf(`struct v { char version[32]; char build[32]; char kind[16]; };
__attribute__((used)) struct v impi_version = {%q, %q, "release"};
int MPI_Init(void) { return 0; }`, ver, build)
			if objs.err = cc(dir, "libmpi-"+ver+".so", "libmpi.so.12", src); objs.err != nil {
				return
			}
		}
		steps := []struct{ out, soname, src string }{
			{"libfabric.so.1", "libfabric.so.1", "int fi_getinfo(void) { return 0; }"},
			{"libccl.so.1", "libccl.so.1", fmt.Sprintf("__attribute__((used)) const char ccl_full[] = %q;\nint ccl_init(void) { return 0; }", ccl16)},
			{"libccl.so.2", "libccl.so.2", "int ccl_two(void) { return 0; }"},
		}
		for _, s := range steps {
			if objs.err = cc(dir, s.out, s.soname, s.src); objs.err != nil {
				return
			}
		}
		// oneccl-cpu 2022.1.2's libccl.so.1: NEEDs libccl.so.2.
		objs.err = cc(dir, "libccl.so.1-needs-2", "libccl.so.1",
			"extern int ccl_two(void);\nint ccl_init(void) { return ccl_two(); }", "-L"+dir, "-l:libccl.so.2")
		if objs.err != nil {
			return
		}
		fiInfo := `#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "--version") == 0) { puts("fi_info: 9.9.9\nlibfabric: 9.9.9-test\nlibfabric api: 9.9"); return 0; }
	puts("ofi_rxm:\n    version: 1.0\ntcp:\n    version: 1.0\nshm:\n    version: 1.0");
	return 0;
}`
		objs.err = ccProgram(dir, "fi_info", fiInfo)
	})
	if objs.err != nil {
		t.Fatal(objs.err)
	}
	return objs.dir
}

func cc(dir, out, soname, src string, extra ...string) error {
	c := filepath.Join(dir, out+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		return err
	}
	args := append([]string{"-shared", "-fPIC", "-o", filepath.Join(dir, out), "-Wl,-soname," + soname, c}, extra...)
	if b, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("cc %v: %v: %s", args, err, b)
	}
	return nil
}

func ccProgram(dir, out, src string) error {
	c := filepath.Join(dir, out+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		return err
	}
	if b, err := exec.Command("cc", "-o", filepath.Join(dir, out), c).CombinedOutput(); err != nil {
		return fmt.Errorf("cc %s: %v: %s", out, err, b)
	}
	return nil
}

// stackOpts shape a fake prefix.
type stackOpts struct {
	impi     string // build18 (default) or build16
	cclNeeds bool   // libccl.so.1 NEEDs libccl.so.2, which is absent
}

// fakeStack is a prefix laid out like the wheels' venv: lib/ with the
// libraries and a provider file, bin/ with mpirun, mpiexec.hydra and
// libfabric/fi_info, and impi_rt's and oneccl_cpu's RECORDs.
func fakeStack(t *testing.T, o stackOpts) string {
	t.Helper()
	objDir := compiled(t)
	if o.impi == "" {
		o.impi = build18
	}
	ver, build, _ := strings.Cut(o.impi, "|")
	p := t.TempDir()
	for _, d := range []string{"lib", "bin/libfabric", "lib/python3.11/site-packages"} {
		mkdir(t, filepath.Join(p, d))
	}
	ccl := "libccl.so.1"
	if o.cclNeeds {
		ccl = "libccl.so.1-needs-2"
	}
	for src, dst := range map[string]string{
		"libmpi-" + ver + ".so": "lib/libmpi.so.12", "libfabric.so.1": "lib/libfabric.so.1",
		ccl: "lib/libccl.so.1", "fi_info": "bin/libfabric/fi_info",
	} {
		copyFile(t, filepath.Join(objDir, src), filepath.Join(p, dst))
	}
	if err := os.Symlink("libfabric.so.1", filepath.Join(p, "lib/libfabric.so")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(p, "lib/libverbs-1.12-fi.so"), "", 0o755)
	writeFile(t, filepath.Join(p, "bin/mpiexec.hydra"), "", 0o755)
	bv, id, _ := strings.Cut(strings.TrimSuffix(build, ")"), " (id: ")
	writeFile(t, filepath.Join(p, "bin/mpirun"), fmt.Sprintf("#!/bin/sh\necho 'Intel(R) MPI Library for Linux* OS, Version %s Build %s (id: %s)'\necho 'Copyright 2003-2026, Intel Corporation.'\n", ver, bv, id), 0o755)
	impiVer := ver
	if ver == "2021.16" {
		impiVer = "2021.16.1"
	}
	cclVer := "2021.16.1"
	if o.cclNeeds {
		cclVer = "2022.1.2"
	}
	record(t, p, "impi_rt", impiVer, "lib/libmpi.so.12", "lib/libfabric.so.1", "lib/libfabric.so", "lib/libverbs-1.12-fi.so",
		"bin/mpirun", "bin/mpiexec.hydra", "bin/libfabric/fi_info")
	record(t, p, "oneccl_cpu", cclVer, "lib/libccl.so.1")
	return p
}

func record(t *testing.T, prefix, dist, version string, files ...string) {
	t.Helper()
	info := filepath.Join(prefix, "lib/python3.11/site-packages", dist+"-"+version+".dist-info")
	mkdir(t, info)
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "../../../%s,sha256=x,1\n", f)
	}
	fmt.Fprintf(&b, "%s-%s.dist-info/RECORD,,\n", dist, version)
	writeFile(t, filepath.Join(info, "RECORD"), b.String(), 0o644)
}

func mkdir(t *testing.T, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p, s string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, string(b), 0o755)
}

// wheelVars is what a job gets from a prefix of the wheels (the intel-pip
// profile's env.intel_wheels).
func wheelVars(p string) map[string]string {
	return map[string]string{
		"PATH":             p + "/bin/libfabric:" + p + "/bin:/usr/bin:/bin",
		"LD_LIBRARY_PATH":  p + "/lib",
		"I_MPI_ROOT":       p,
		"CCL_ROOT":         p,
		"FI_PROVIDER_PATH": p + "/lib",
	}
}

// intelProfile is intel-pip's: Intel MPI's mpirun, oneCCL, FI_PROVIDER=tcp.
func intelProfile() *profile.Profile {
	return &profile.Profile{
		MPI: profile.MPI{Flavor: mpirun.IntelMPI, Launcher: mpirun.ProgramMpirun, Binary: "mpirun", Bootstrap: "slurm"},
		Env: profile.Env{Vars: map[string]string{"FI_PROVIDER": "tcp", "CCL_WORKER_COUNT": "1"}},
	}
}

// realEnv is an Env running real programs (ldd, fi_info, mpirun) with the
// process environment vars; the loader cache is left out unless cache is
// set (this machine's has a system libfabric).
func realEnv(vars map[string]string, p *profile.Profile, cache bool) *Env {
	env := &Env{
		Getenv: func(k string) string { return vars[k] },
		Environ: func() []string {
			var out []string
			for _, k := range slices.Sorted(maps.Keys(vars)) {
				out = append(out, k+"="+vars[k])
			}
			return out
		},
		LookPath: func(file, path string) (string, error) {
			if file == "ldconfig" && !cache {
				return "", exec.ErrNotFound
			}
			return lookPath(file, path)
		},
		Run:         ExecRunner,
		Timeout:     10 * time.Second,
		ProfileName: "test",
	}
	if p != nil {
		env.Profile = &profile.Resolved{Name: "test", Path: "/p/test.toml", Profile: *p}
	}
	return env
}

func runIntel(env *Env) map[string]Result {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := map[string]Result{}
	checks := []Check{{"intel-mpi", checkIntelMPI}, {"oneccl", checkOneCCL}, {"libfabric", checkLibfabric}}
	for _, r := range Run(ctx, env, checks) {
		got[r.Name] = r
	}
	return got
}

// wantResult: the status, and texts the message and the fix contain.
type wantResult struct {
	status Status
	msg    []string
	fix    string
}

func checkWant(t *testing.T, got map[string]Result, want map[string]wantResult) {
	t.Helper()
	for name, w := range want {
		r, ok := got[name]
		if w.status == notHere {
			if ok {
				t.Errorf("%s: %+v, want no line", name, r)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: no result", name)
			continue
		}
		bad := r.Status != w.status || !strings.Contains(r.Fix, w.fix)
		for _, m := range w.msg {
			bad = bad || !strings.Contains(r.Message, m)
		}
		if bad {
			t.Errorf("%s = %s %q\n  fix %q\nwant %s with %q, fix with %q", name, r.Status, r.Message, r.Fix, w.status, w.msg, w.fix)
		}
	}
}

func TestIntelChecks(t *testing.T) {
	good := fakeStack(t, stackOpts{})
	old := fakeStack(t, stackOpts{impi: build16})
	broken := fakeStack(t, stackOpts{cclNeeds: true})
	half := fakeStack(t, stackOpts{})
	if err := os.Remove(filepath.Join(half, "bin/mpiexec.hydra")); err != nil {
		t.Fatal(err)
	}
	noDevLink := fakeStack(t, stackOpts{})
	if err := os.Remove(filepath.Join(noDevLink, "lib/libfabric.so")); err != nil {
		t.Fatal(err)
	}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	openMPI := &profile.Profile{MPI: profile.MPI{Flavor: mpirun.OpenMPI, Launcher: mpirun.ProgramMpirun, Binary: "mpirun.openmpi"}}

	for _, tc := range []struct {
		name    string
		vars    map[string]string
		profile *profile.Profile
		version func() string // Env.CCLVersion
		want    map[string]wantResult
	}{
		{
			name: "the wheels' stack", vars: wheelVars(good), profile: intelProfile(),
			want: map[string]wantResult{
				"intel-mpi": {OK, []string{"Intel MPI 2021.18.1 Build 20260626 (id: b44796a): libmpi.so.12 from " + good + "/lib (LD_LIBRARY_PATH, wheel impi-rt 2021.18.1) loads",
					"mpirun (" + good + "/bin/mpirun) is the same build"}, ""},
				"oneccl": {OK, []string{"oneCCL 2021.16.1 (the library's version string " + ccl16 + "): libccl.so.1 from " + good + "/lib (LD_LIBRARY_PATH, wheel oneccl-cpu 2021.16.1) loads"}, ""},
				"libfabric": {OK, []string{"libfabric 9.9.9-test from " + good + "/lib (LD_LIBRARY_PATH): providers ofi_rxm, tcp, shm",
					"FI_PROVIDER=tcp is among them"}, ""},
			},
		},
		{
			name: "oneCCL's own version call", vars: wheelVars(good), profile: intelProfile(),
			version: func() string { return "2021.16.1" },
			want:    map[string]wantResult{"oneccl": {OK, []string{"oneCCL 2021.16.1 (ccl::get_library_version): libccl.so.1 from"}, ""}},
		},
		{
			name: "the binary's oneCCL is not the job's", vars: wheelVars(good), profile: intelProfile(),
			version: func() string { return "2021.15.0" },
			want: map[string]wantResult{"oneccl": {Warn, []string{"this binary runs on oneCCL 2021.15.0", "is oneCCL 2021.16.1"},
				"make build-ccl"}},
		},
		{
			name: "launcher of another install", profile: intelProfile(),
			vars: with(wheelVars(good), "PATH", old+"/bin:"+good+"/bin:/usr/bin:/bin"),
			want: map[string]wantResult{
				"intel-mpi": {Fail, []string{"mpirun from " + old + "/bin is Intel MPI 2021.16 Build 20250722 (id: c37a540) but libmpi.so.12 from " +
					good + "/lib is 2021.18.1 Build 20260626 (id: b44796a): put one install first on PATH and LD_LIBRARY_PATH"},
					"export PATH=" + good + "/bin:$PATH (the library's launcher), or export LD_LIBRARY_PATH=" + old + "/lib:$LD_LIBRARY_PATH (the launcher's library)"},
			},
		},
		{
			name: "library of another install", profile: intelProfile(),
			vars: with(wheelVars(good), "LD_LIBRARY_PATH", old+"/lib"),
			want: map[string]wantResult{
				"intel-mpi": {Fail, []string{"mpirun from " + good + "/bin is Intel MPI 2021.18.1", "libmpi.so.12 from " + old + "/lib is 2021.16 Build 20250722"}, ""},
			},
		},
		{
			name: "oneccl-cpu 2022.1.2: libccl.so.2 missing", vars: wheelVars(broken), profile: intelProfile(),
			want: map[string]wantResult{
				"oneccl": {Fail, []string{"libccl.so.1 from " + broken + "/lib (LD_LIBRARY_PATH, wheel oneccl-cpu 2022.1.2) cannot be loaded: it needs libccl.so.2, not found"},
					"pip install oneccl-cpu==2021.16.1 (the newest CPU wheel whose libccl.so.1 loads alone), or install the SYCL oneccl wheel"},
				"intel-mpi": {OK, nil, ""},
			},
		},
		{
			name: "half-installed impi-rt", vars: wheelVars(half), profile: intelProfile(),
			want: map[string]wantResult{
				"intel-mpi": {Fail, []string{"impi-rt 2021.18.1 in " + half + " is half-installed: bin/mpiexec.hydra is missing"},
					"reinstall it: " + half + "/bin/pip install --force-reinstall --no-deps impi-rt==2021.18.1"},
			},
		},
		{
			name: "LD_LIBRARY_PATH unset", profile: intelProfile(), vars: with(wheelVars(good), "LD_LIBRARY_PATH", ""),
			want: map[string]wantResult{
				"intel-mpi": {Fail, []string{"libmpi.so.12 is in " + good + "/lib (under I_MPI_ROOT) but a job's loader does not find it: LD_LIBRARY_PATH is unset"},
					"export LD_LIBRARY_PATH=" + good + "/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"},
				"oneccl":    {Fail, []string{"libccl.so.1 is in " + good + "/lib (under CCL_ROOT)"}, "export LD_LIBRARY_PATH=" + good + "/lib"},
				"libfabric": {Fail, []string{"libfabric.so.1 is in " + good + "/lib (under I_MPI_ROOT)"}, ""},
			},
		},
		{
			name: "nothing installed, Intel profile", profile: intelProfile(), vars: map[string]string{"PATH": "/usr/bin:/bin"},
			want: map[string]wantResult{
				"intel-mpi": {Fail, []string{"libmpi.so.12 is not found: LD_LIBRARY_PATH is unset"}, "pip install impi-rt==2021.18.1"},
				"oneccl":    {Fail, []string{"libccl.so.1 is not found"}, "pip install oneccl-cpu==2021.16.1"},
			},
		},
		{
			name: "Open MPI profile, no Intel stack: no lines", profile: openMPI, vars: map[string]string{"PATH": "/usr/bin:/bin"},
			want: map[string]wantResult{"intel-mpi": {status: notHere}, "oneccl": {status: notHere}, "libfabric": {status: notHere}},
		},
		{
			name: "Open MPI profile with I_MPI_ROOT set: warnings", profile: openMPI,
			vars: map[string]string{"PATH": "/usr/bin:/bin", "I_MPI_ROOT": good},
			want: map[string]wantResult{"intel-mpi": {Warn, []string{"libmpi.so.12 is in " + good + "/lib (under I_MPI_ROOT)"}, ""},
				"oneccl": {status: notHere}},
		},
		{
			name: "FI_PROVIDER libfabric lacks", profile: intelProfile(), vars: with(wheelVars(good), "FI_PROVIDER", "cxi"),
			want: map[string]wantResult{"libfabric": {Fail, []string{"FI_PROVIDER=cxi, but libfabric 9.9.9-test from " + good + "/lib (LD_LIBRARY_PATH) has no cxi provider here",
				"fi_info -l lists ofi_rxm, tcp, shm"}, "set FI_PROVIDER to one of those (tcp works on any network)"}},
		},
		{
			name: "provider in lib/, FI_PROVIDER_PATH unset", profile: intelProfile(),
			vars: with(wheelVars(good), "FI_PROVIDER", "verbs;ofi_rxm", "FI_PROVIDER_PATH", ""),
			want: map[string]wantResult{"libfabric": {Fail, []string{"has no verbs provider here (FI_PROVIDER_PATH unset"},
				"export FI_PROVIDER_PATH=" + good + "/lib (libfabric loads libverbs-1.12-fi.so from there)"}},
		},
		{
			name: "provider file there, not listed", profile: intelProfile(), vars: with(wheelVars(good), "FI_PROVIDER", "verbs"),
			want: map[string]wantResult{"libfabric": {Fail, []string{"has no verbs provider here"}, "did not come up on this node"}},
		},
		{
			name: "mpi transport without I_MPI_ROOT", profile: intelProfile(),
			vars: with(wheelVars(good), "I_MPI_ROOT", "", "CCL_ATL_TRANSPORT", "mpi"),
			want: map[string]wantResult{"oneccl": {Fail, []string{"oneCCL's transport is mpi (CCL_ATL_TRANSPORT=mpi), but neither I_MPI_ROOT nor ONEAPI_ROOT is set: oneCCL stops with \"" + cclMPIRootError + "\""},
				"export I_MPI_ROOT="}},
		},
		{
			name: "ONEAPI_ROOT will do", profile: intelProfile(),
			vars: with(wheelVars(good), "I_MPI_ROOT", "", "ONEAPI_ROOT", "/opt/intel/oneapi", "CCL_ATL_TRANSPORT", "mpi"),
			want: map[string]wantResult{"oneccl": {OK, []string{"transport CCL_ATL_TRANSPORT=mpi"}, ""}},
		},
		{
			name: "ofi transport without libfabric.so", profile: intelProfile(),
			vars: with(wheelVars(noDevLink), "CCL_ATL_TRANSPORT", "ofi"),
			want: map[string]wantResult{"oneccl": {Fail, []string{"oneCCL's ofi transport opens libfabric.so, which a job's loader does not find",
				"could not initialize any transport library"}, "LD_LIBRARY_PATH"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := realEnv(tc.vars, tc.profile, false)
			env.CCLVersion = tc.version
			start := time.Now()
			checkWant(t, runIntel(env), tc.want)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the checks took %v: want seconds", d)
			}
		})
	}
}

// A profile's env.vars reach the checks, a value the user exported winning.
func TestIntelRankVars(t *testing.T) {
	good := fakeStack(t, stackOpts{})
	p := intelProfile()
	p.Env.Vars["FI_PROVIDER"] = "cxi"
	got := runIntel(realEnv(wheelVars(good), p, false))
	checkWant(t, got, map[string]wantResult{"libfabric": {Fail, []string{"FI_PROVIDER=cxi"}, ""}})
	vars := wheelVars(good)
	vars["FI_PROVIDER"] = "tcp"
	got = runIntel(realEnv(vars, p, false))
	checkWant(t, got, map[string]wantResult{"libfabric": {OK, []string{"FI_PROVIDER=tcp is among them"}, ""}})
}
