package doctor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/profile"
)

// fake is a machine for the checks: binaries on PATH and what running
// them prints.
type fake struct {
	path    map[string]string // name → path
	outputs map[string]string // "path arg0" → stdout; "" key missing = exit 1
	vars    map[string]string
}

func (f fake) env(p *profile.Profile) *Env {
	env := &Env{
		Getenv: func(k string) string { return f.vars[k] },
		Environ: func() []string {
			var environ []string
			for k, v := range f.vars {
				environ = append(environ, k+"="+v)
			}
			return environ
		},
		LookPath: func(name, _ string) (string, error) { // every PATH is f.path
			if p, ok := f.path[name]; ok {
				return p, nil
			}
			return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
		},
		Run: func(ctx context.Context, c Command) (string, string, error) {
			key := c.Path
			if len(c.Args) > 0 {
				key += " " + c.Args[0]
			}
			out, ok := f.outputs[key]
			if out == "HANG" {
				<-ctx.Done()
				return "", "", ctx.Err()
			}
			if !ok {
				return "", "boom\nlast words", errors.New("exit status 1")
			}
			return out, "", nil
		},
		Source:    func(context.Context, *Env, profile.Env) (envsetup.Changes, error) { return envsetup.Changes{}, nil },
		Listen:    func(int) error { return nil },
		SameFile:  func(a, b string) bool { return a == b },
		NumCPU:    4,
		Hostname:  "h1",
		SysPython: "/usr/bin/python3",
		Timeout:   200 * time.Millisecond,
	}
	env.ProfileName = "test"
	if p != nil {
		env.Profile = &profile.Resolved{Name: "test", Path: "/p/test.toml", Profile: *p}
	}
	return env
}

func run(env *Env, names ...string) map[string]Result {
	var checks []Check
	for _, c := range Checks() {
		for _, n := range names {
			if c.Name == n {
				checks = append(checks, c)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	got := map[string]Result{}
	for _, r := range Run(ctx, env, checks) {
		got[r.Name] = r
	}
	return got
}

// pyJSON is a probe's answer: torch and the given packages (name=version,
// or name=!error).
func pyJSON(pkgs ...string) string {
	var parts []string
	for _, p := range pkgs {
		name, v, _ := strings.Cut(p, "=")
		if e, isErr := strings.CutPrefix(v, "!"); isErr {
			parts = append(parts, fmt.Sprintf(`%q: {"error": %q, "missing": %v}`, name, e, strings.HasPrefix(e, "ModuleNotFoundError")))
			continue
		}
		parts = append(parts, fmt.Sprintf(`%q: {"version": %q, "file": "/site/%s/__init__.py"}`, name, v, name))
	}
	return `{"executable": "/x/python3", "python": "3.11.2", "packages": {` + strings.Join(parts, ", ") + `}}`
}

const noTorch = "torch=!ModuleNotFoundError: No module named 'torch'"

var (
	localProfile = &profile.Profile{MPI: profile.MPI{Flavor: mpirun.OpenMPI, Launcher: mpirun.ProgramMpirun, Binary: "mpirun.openmpi"}}
	cclProfile   = &profile.Profile{MPI: profile.MPI{Flavor: mpirun.IntelMPI, Launcher: mpirun.ProgramMpirun, Binary: "mpirun"},
		Env: profile.Env{Vars: map[string]string{"CCL_ATL_TRANSPORT": "ofi"}}}
)

type want struct {
	status Status
	in     string // in the message or the fix
}

func TestPythonChecks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		profile *profile.Profile
		python  string
		pathPy  string // python3 on PATH's probe output
		sysPy   string // /usr/bin/python3's
		want    map[string]want
	}{
		{
			name: "PATH python3 without torch, /usr/bin/python3 with", profile: localProfile,
			pathPy: pyJSON(noTorch), sysPy: pyJSON("torch=1.13.0a0"),
			want: map[string]want{
				"python":          {Warn, "/usr/bin/python3 has torch 1.13.0a0"},
				"torch":           {Warn, "use it (--python /usr/bin/python3)"},
				"oneccl-bindings": {Skip, "<version matching torch>"},
				"ipex":            {Skip, "not installed"},
			},
		},
		{
			name: "PATH python3 with torch, /usr/bin/python3 without", profile: localProfile,
			pathPy: pyJSON("torch=2.1.0+cpu"), sysPy: pyJSON(noTorch),
			want: map[string]want{
				"python": {Warn, "/usr/bin/python3 has none"},
				"torch":  {OK, "torch 2.1.0+cpu"},
			},
		},
		{
			name: "no torch under a oneCCL profile fails", profile: cclProfile,
			pathPy: pyJSON(noTorch), sysPy: pyJSON(noTorch),
			want: map[string]want{
				"python":          {OK, "Python 3.11.2"},
				"torch":           {Fail, "pip install torch"},
				"oneccl-bindings": {Fail, "pip install oneccl_bind_pt==<version matching torch>"},
			},
		},
		{
			name: "bindings missing under a oneCCL profile", profile: cclProfile, python: "/usr/bin/python3",
			sysPy: pyJSON("torch=1.13.0a0", "oneccl_bindings_for_pytorch=!ModuleNotFoundError: x", "torch_ccl=!ModuleNotFoundError: y"),
			want: map[string]want{
				"torch":           {OK, "torch 1.13.0a0 (/site/torch)"},
				"oneccl-bindings": {Fail, "pip install oneccl_bind_pt==1.13.0 "},
			},
		},
		{
			name: "bindings for another torch", profile: cclProfile, python: "/usr/bin/python3",
			sysPy: pyJSON("torch=1.13.1", "oneccl_bindings_for_pytorch=1.12.100+cpu"),
			want: map[string]want{
				"oneccl-bindings": {Fail, "Mismatch in kernel C++ signatures"},
			},
		},
		{
			name: "old torch_ccl name matching", profile: cclProfile, python: "/usr/bin/python3",
			sysPy: pyJSON("torch=1.12.1", "oneccl_bindings_for_pytorch=!ModuleNotFoundError: x", "torch_ccl=1.12.100"),
			want: map[string]want{
				"oneccl-bindings": {OK, "torch_ccl 1.12.100 matches torch 1.12.1"},
			},
		},
		{
			name: "bindings match but do not import", profile: cclProfile, python: "/usr/bin/python3",
			sysPy: `{"python": "3.11", "packages": {"torch": {"version": "2.1.0a0+cxx11.abi"},
				"oneccl_bindings_for_pytorch": {"version": "2.1.100+xpu", "error": "ImportError: libccl.so.1: cannot open shared object file"}}}`,
			want: map[string]want{
				"oneccl-bindings": {Fail, "vars.sh"},
			},
		},
		{
			name: "IPEX for this torch", profile: localProfile, python: "/usr/bin/python3",
			sysPy: pyJSON("torch=2.1.0a0+cxx11.abi", "intel_extension_for_pytorch=2.1.10+xpu"),
			want:  map[string]want{"ipex": {OK, "2.1.10+xpu matches torch 2.1.0a0+cxx11.abi"}},
		},
		{
			name: "IPEX for another torch", profile: localProfile, python: "/usr/bin/python3",
			sysPy: pyJSON("torch=2.2.0", "intel_extension_for_pytorch=2.1.10+xpu"),
			want:  map[string]want{"ipex": {Fail, "is for torch 2.1.*, torch is 2.2.0"}},
		},
		{
			name: "probe output is not JSON", profile: localProfile, python: "/usr/bin/python3",
			sysPy: "Segmentation fault",
			want: map[string]want{
				"python": {Fail, "unexpected probe output"},
				"torch":  {Skip, "see the python check"},
			},
		},
		{
			name: "probe hangs", profile: localProfile, python: "/usr/bin/python3", sysPy: "HANG",
			want: map[string]want{"python": {Fail, "timed out after 200ms | a first import of torch can take longer than 200ms (a cold cache on a parallel file system): run doctor again, or give it more time with --timeout 1m0s"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fake{
				path:    map[string]string{"python3": "/opt/py/bin/python3", "/usr/bin/python3": "/usr/bin/python3"},
				outputs: map[string]string{"/usr/bin/python3 -c": tc.sysPy},
			}
			if tc.pathPy != "" {
				f.outputs["/opt/py/bin/python3 -c"] = tc.pathPy
			}
			env := f.env(tc.profile)
			env.Python = tc.python
			var names []string
			for n := range tc.want {
				names = append(names, n)
			}
			got := run(env, names...)
			for n, w := range tc.want {
				r := got[n]
				if r.Status != w.status || !strings.Contains(r.Message+" | "+r.Fix, w.in) {
					t.Errorf("%s = %s %q (fix %q), want %s containing %q", n, r.Status, r.Message, r.Fix, w.status, w.in)
				}
			}
		})
	}
}

func TestMpirunCheck(t *testing.T) {
	const (
		ompi  = "mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
		impi  = "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\n"
		mpich = "HYDRA build details:\n    Version:                                 4.0.2\n"
	)
	for _, tc := range []struct {
		name    string
		profile *profile.Profile
		path    map[string]string
		outputs map[string]string
		want    want
	}{
		{"open mpi as the profile says", localProfile,
			map[string]string{"mpirun.openmpi": "/usr/bin/mpirun.openmpi"},
			map[string]string{"/usr/bin/mpirun.openmpi --version": ompi}, want{OK, "mpirun (Open MPI) 4.1.4"}},
		{"intel profile, open mpi first on PATH", cclProfile,
			map[string]string{"mpirun": "/usr/bin/mpirun"},
			map[string]string{"/usr/bin/mpirun --version": ompi}, want{Fail, "is Open MPI's, not Intel MPI's: put Intel MPI's first on PATH"}},
		{"intel profile, intel mpirun", cclProfile,
			map[string]string{"mpirun": "/opt/intel/oneapi/mpi/latest/bin/mpirun"},
			map[string]string{"/opt/intel/oneapi/mpi/latest/bin/mpirun --version": impi}, want{OK, "Intel(R) MPI Library"}},
		{"intel profile, mpich mpirun", cclProfile,
			map[string]string{"mpirun": "/usr/bin/mpirun"},
			map[string]string{"/usr/bin/mpirun --version": mpich}, want{Fail, "is MPICH's, not Intel MPI's"}},
		{"not on PATH", localProfile, nil, nil, want{Fail, "mpirun.openmpi (for openmpi) is not on PATH"}},
		{"unknown output", cclProfile,
			map[string]string{"mpirun": "/usr/bin/mpirun"},
			map[string]string{"/usr/bin/mpirun --version": "hello"}, want{Warn, "cannot tell its MPI flavor"}},
		{"mpirun hangs", cclProfile,
			map[string]string{"mpirun": "/usr/bin/mpirun"},
			map[string]string{"/usr/bin/mpirun --version": "HANG"}, want{Fail, "/usr/bin/mpirun --version: timed out after 200ms"}},
		{"srun profile", &profile.Profile{MPI: profile.MPI{Flavor: mpirun.MPICH, Launcher: mpirun.ProgramSrun}},
			nil, nil, want{Skip, "srun"}},
		{"no profile", nil, nil, nil, want{Skip, "valid profile"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(fake{path: tc.path, outputs: tc.outputs}.env(tc.profile), "mpirun")["mpirun"]
			if r.Status != tc.want.status || !strings.Contains(r.Message, tc.want.in) {
				t.Errorf("mpirun = %s %q (fix %q), want %s containing %q", r.Status, r.Message, r.Fix, tc.want.status, tc.want.in)
			}
		})
	}
}

func TestSlurmChecks(t *testing.T) {
	all := map[string]string{"sbatch": "/usr/bin/sbatch", "srun": "/usr/bin/srun", "scontrol": "/usr/bin/scontrol"}
	srunProfile := &profile.Profile{MPI: profile.MPI{Flavor: mpirun.MPICH, Launcher: mpirun.ProgramSrun}}
	for _, tc := range []struct {
		name       string
		profile    *profile.Profile
		path       map[string]string
		ping       string
		commands   Status
		controller want
	}{
		{"up", localProfile, all, "Slurmctld(primary) at ctl is UP\n", OK, want{OK, "ctl is UP"}},
		{"down, not needed", localProfile, all, "Slurmctld(primary) at ctl is DOWN\n", OK, want{Warn, "DOWN"}},
		{"down, needed", srunProfile, all, "Slurmctld(primary) at ctl is DOWN\n", OK, want{Fail, "DOWN"}},
		{"ping hangs", srunProfile, all, "HANG", OK, want{Fail, "/usr/bin/scontrol ping: timed out after 200ms"}},
		{"no slurm", localProfile, nil, "", Warn, want{Skip, "scontrol is not on PATH"}},
		{"no slurm, needed", srunProfile, map[string]string{"scontrol": "/usr/bin/scontrol"}, "", Fail,
			want{Fail, "/usr/bin/scontrol ping: exit status 1: last words"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outputs := map[string]string{}
			if tc.ping != "" {
				outputs["/usr/bin/scontrol ping"] = tc.ping
			}
			got := run(fake{path: tc.path, outputs: outputs}.env(tc.profile), "slurm-commands", "slurm-controller")
			if got["slurm-commands"].Status != tc.commands {
				t.Errorf("slurm-commands = %+v, want %s", got["slurm-commands"], tc.commands)
			}
			r := got["slurm-controller"]
			if r.Status != tc.controller.status || !strings.Contains(r.Message, tc.controller.in) {
				t.Errorf("slurm-controller = %s %q, want %s containing %q", r.Status, r.Message, tc.controller.status, tc.controller.in)
			}
		})
	}
}

func TestScriptsCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "vars.sh")
	bad := filepath.Join(dir, "bad.sh")
	os.WriteFile(good, []byte("export X=1\n"), 0o644)
	os.WriteFile(bad, []byte("echo nope >&2; return 3\n"), 0o644)
	// Like oneCCL's vars.sh after setvars.sh: it needs what vars.sh set.
	needs := filepath.Join(dir, "needs.sh")
	os.WriteFile(needs, []byte("[ -n \"${X-}\" ] || { echo 'X is not set' >&2; return 4; }\n"), 0o644)
	// A python whose packages hold the oneCCL bindings, with their setvars.sh.
	pkg := filepath.Join(dir, "py", "oneccl_bindings_for_pytorch")
	os.MkdirAll(filepath.Join(pkg, "env"), 0o755)
	os.WriteFile(filepath.Join(pkg, "__init__.py"), nil, 0o644)
	os.WriteFile(filepath.Join(pkg, "env", "setvars.sh"), []byte("export CCL_ROOT=x\n"), 0o644)
	withBindings := filepath.Join(dir, "python-with-bindings")
	os.WriteFile(withBindings, []byte("#!/bin/sh\nPYTHONPATH="+filepath.Join(dir, "py")+" exec /usr/bin/python3 \"$@\"\n"), 0o755)
	bindings := func(python string) *profile.Profile {
		p := *localProfile
		p.Env.OneCCLBindings, p.Env.Python = true, python
		return &p
	}
	withScripts := func(s ...profile.Script) *profile.Profile {
		p := *localProfile
		p.Env.Source = s
		return &p
	}
	for _, tc := range []struct {
		name    string
		profile *profile.Profile
		want    want
	}{
		{"none", localProfile, want{Skip, "no scripts"}},
		{"missing", withScripts(profile.Script{Script: filepath.Join(dir, "nope.sh")}), want{Fail, "nope.sh does not exist"}},
		{"sources", withScripts(profile.Script{Script: good, Args: []string{"--force"}}), want{OK, "bash sources " + good}},
		{"fails", withScripts(profile.Script{Script: good}, profile.Script{Script: bad, Args: []string{"-x"}}),
			want{Fail, "sourcing " + bad + " failed (exit 3): nope"}},
		{"in one shell", withScripts(profile.Script{Script: good}, profile.Script{Script: needs}), want{OK, "bash sources " + good + ", " + needs}},
		{"in order", withScripts(profile.Script{Script: needs}, profile.Script{Script: good}), want{Fail, "X is not set"}},
		{"oneCCL bindings", bindings(withBindings), want{OK, "the oneCCL bindings' env/setvars.sh"}},
		{"no oneCCL bindings", bindings("/usr/bin/python3"), want{Fail, "neither oneccl_bindings_for_pytorch nor torch_ccl is installed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(withBash(fake{}.env(tc.profile)), "env-scripts")["env-scripts"]
			if r.Status != tc.want.status || !strings.Contains(r.Message, tc.want.in) {
				t.Errorf("env-scripts = %s %q, want %s containing %q", r.Status, r.Message, tc.want.status, tc.want.in)
			}
		})
	}
}

// withBash is env with this machine's environment, programs and bash, for
// the checks of what the profile's scripts really do.
func withBash(env *Env) *Env {
	env.Getenv, env.Environ, env.LookPath = os.Getenv, os.Environ, lookPath
	env.Run, env.Source, env.Timeout = ExecRunner, EnvSource, 5*time.Second
	return env
}

// The launcher and the Python stack are checked in the environment the
// profile's scripts leave, as a job runs them, with real bash.
func TestChecksInTheScriptsEnvironment(t *testing.T) {
	dir := t.TempDir()
	bin, py := filepath.Join(dir, "bin"), filepath.Join(dir, "py")
	for _, d := range []string{bin, filepath.Join(py, "torch"), filepath.Join(dir, "bind", "oneccl_bindings_for_pytorch", "env")} {
		os.MkdirAll(d, 0o755)
	}
	write := func(path, text string, mode os.FileMode) string {
		if err := os.WriteFile(path, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// Intel MPI's mpirun, as setvars.sh (or the bindings' setvars.sh) puts
	// it first on PATH; a python3 of the site's; a stand-in torch.
	write(filepath.Join(bin, "mpirun"), "#!/bin/sh\necho 'Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)'\n", 0o755)
	write(filepath.Join(bin, "python3"), "#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n", 0o755)
	write(filepath.Join(py, "torch", "__init__.py"), "__version__ = '2.1.0'\n", 0o644)
	setvars := write(filepath.Join(dir, "setvars.sh"), "export PATH="+bin+":$PATH PYTHONPATH="+py+"\n", 0o644)
	failing := write(filepath.Join(dir, "failing.sh"), "echo 'no oneAPI here' >&2; return 1\n", 0o644)
	// The oneCCL bindings' env/setvars.sh, found by a python that has them.
	write(filepath.Join(dir, "bind", "oneccl_bindings_for_pytorch", "__init__.py"), "", 0o644)
	write(filepath.Join(dir, "bind", "oneccl_bindings_for_pytorch", "env", "setvars.sh"), "export PATH="+bin+":$PATH\n", 0o644)
	withBindings := write(filepath.Join(dir, "python-with-bindings"),
		"#!/bin/sh\nPYTHONPATH="+filepath.Join(dir, "bind")+" exec /usr/bin/python3 \"$@\"\n", 0o755)

	bindings := *cclProfile
	bindings.Env.OneCCLBindings, bindings.Env.Python = true, withBindings
	for _, tc := range []struct {
		name    string
		profile *profile.Profile
		want    map[string]want
	}{
		{"the scripts put Intel MPI's mpirun first on PATH", withSource(cclProfile, setvars), map[string]want{
			"env-scripts": {OK, "bash sources " + setvars},
			"mpirun":      {OK, "mpirun → " + filepath.Join(bin, "mpirun") + ": Intel(R) MPI Library for Linux* OS, Version 2021.10"},
		}},
		{"the bindings' setvars.sh puts their Intel MPI's mpirun first on PATH", &bindings, map[string]want{
			"mpirun": {OK, "mpirun → " + filepath.Join(bin, "mpirun")},
		}},
		{"python3 and PYTHONPATH from the scripts", withSource(cclProfile, setvars), map[string]want{
			"python": {OK, filepath.Join(bin, "python3") + ": Python 3"},
			"torch":  {OK, "torch 2.1.0 (" + filepath.Join(py, "torch") + ")"},
		}},
		{"a failing script: the checks that need it skip", withSource(cclProfile, setvars, failing), map[string]want{
			"env-scripts":     {Fail, "sourcing " + failing + " failed (exit 1): no oneAPI here"},
			"mpirun":          {Skip, needsScripts},
			"python":          {Skip, needsScripts},
			"torch":           {Skip, needsScripts},
			"oneccl-bindings": {Skip, needsScripts},
			"ipex":            {Skip, needsScripts},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			for n := range tc.want {
				names = append(names, n)
			}
			got := run(withBash(fake{}.env(tc.profile)), names...)
			for n, w := range tc.want {
				if r := got[n]; r.Status != w.status || !strings.Contains(r.Message, w.in) {
					t.Errorf("%s = %s %q (fix %q), want %s containing %q", n, r.Status, r.Message, r.Fix, w.status, w.in)
				}
			}
		})
	}
}

// The checks share one sourcing, and those needing the job's environment
// get its PATH and its whole environment; a profile sourcing nothing
// leaves doctor's own, as it was.
func TestJobEnvironment(t *testing.T) {
	const impi = "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\n"
	for _, tc := range []struct {
		name    string
		profile *profile.Profile
		sources int
		paths   []string // the PATHs programs were looked up on
		envs    [][]string
	}{
		{"sources nothing", cclProfile, 0, []string{"/usr/bin"}, [][]string{nil, nil}},
		{"sources a script", withSource(cclProfile, "/s.sh"), 1, []string{"/job/bin:/usr/bin"},
			[][]string{{"PATH=/job/bin:/usr/bin", "X=1"}, {"PATH=/job/bin:/usr/bin", "X=1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fake{path: map[string]string{"mpirun": "/bin/mpirun", "python3": "/bin/python3"},
				outputs: map[string]string{"/bin/mpirun --version": impi, "/bin/python3 -c": pyJSON("torch=2.1.0")},
				vars:    map[string]string{"PATH": "/usr/bin"}}
			env := f.env(tc.profile)
			env.SysPython = "" // one python
			var mu sync.Mutex
			sources, paths, envs := 0, map[string]bool{}, [][]string(nil)
			env.Source = func(context.Context, *Env, profile.Env) (envsetup.Changes, error) {
				mu.Lock()
				defer mu.Unlock()
				sources++
				return envsetup.Changes{Set: map[string]string{"PATH": "/job/bin:/usr/bin", "X": "1"}}, nil
			}
			lookPath, run0 := env.LookPath, env.Run
			env.LookPath = func(name, path string) (string, error) {
				mu.Lock()
				paths[path] = true
				mu.Unlock()
				return lookPath(name, path)
			}
			env.Run = func(ctx context.Context, c Command) (string, string, error) {
				mu.Lock()
				envs = append(envs, c.Env)
				mu.Unlock()
				return run0(ctx, c)
			}
			got := run(env, "mpirun", "python", "torch", "oneccl-bindings", "ipex")
			if got["mpirun"].Status != OK || got["torch"].Status != OK {
				t.Errorf("mpirun = %+v, torch = %+v, want ok", got["mpirun"], got["torch"])
			}
			if sources != tc.sources {
				t.Errorf("sourced %d times, want %d", sources, tc.sources)
			}
			if diff := cmp.Diff(tc.paths, slices.Sorted(maps.Keys(paths))); diff != "" {
				t.Errorf("PATHs looked up on (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.envs, envs); diff != "" {
				t.Errorf("the commands' environments (-want +got):\n%s", diff)
			}
		})
	}
}

func withSource(p *profile.Profile, scripts ...string) *profile.Profile {
	q := *p
	for _, s := range scripts {
		q.Env.Source = append(q.Env.Source, profile.Script{Script: s})
	}
	return &q
}

func TestPortAndOversubscription(t *testing.T) {
	fixed := *localProfile
	fixed.Rendezvous = profile.Rendezvous{PortPolicy: profile.PortFixed, Port: 12345}
	for _, tc := range []struct {
		name     string
		profile  *profile.Profile
		vars     map[string]string
		taken    bool
		port     want
		oversubs want
	}{
		{"defaults", localProfile, nil, false, want{OK, "port 29500 (the default, outside a job)"}, want{OK, "1 rank on this node × 1 thread"}},
		{"derived port taken", localProfile, map[string]string{"SLURM_JOB_ID": "42"}, true,
			want{Warn, "port 15042 (derived from job 42) is taken"}, want{OK, ""}},
		{"MASTER_PORT taken", localProfile, map[string]string{"MASTER_PORT": "2222"}, true,
			want{Fail, "port 2222 (MASTER_PORT) is taken"}, want{OK, ""}},
		{"bad MASTER_PORT", localProfile, map[string]string{"MASTER_PORT": "x"}, false,
			want{Fail, `MASTER_PORT="x" is not a port`}, want{Skip, "topology is unknown"}},
		{"fixed", &fixed, nil, false, want{OK, "12345 (the profile's fixed port)"}, want{OK, ""}},
		// envsetup.MasterPort's order: the rank's MASTER_PORT, the profile's, the job step's.
		{"MASTER_PORT over fixed", &fixed, map[string]string{"MASTER_PORT": "2222", "SLURM_JOB_ID": "42"}, false,
			want{OK, "2222 (MASTER_PORT)"}, want{OK, ""}},
		{"fixed over the job's", &fixed, map[string]string{"SLURM_JOB_ID": "42"}, false,
			want{OK, "12345 (the profile's fixed port)"}, want{OK, ""}},
		{"a later step's", localProfile, map[string]string{"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "3"}, false,
			want{OK, "(derived from job 42.3)"}, want{Skip, ""}},
		{"oversubscribed", localProfile, map[string]string{"LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0",
			"MASTER_ADDR": "h1", "MASTER_PORT": "29500", "OMP_NUM_THREADS": "4"}, false,
			want{OK, ""}, want{Warn, "2 ranks on this node × 4 threads (OMP_NUM_THREADS=4) on 4 usable cores: oversubscribed"}},
		{"bad topology", localProfile, map[string]string{"RANK": "3", "WORLD_SIZE": "2"}, false,
			want{OK, ""}, want{Skip, "topology is unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := fake{vars: tc.vars}.env(tc.profile)
			if tc.taken {
				env.Listen = func(int) error { return errors.New("address already in use") }
			}
			got := run(env, "master-port", "oversubscription", "topology")
			for n, w := range map[string]want{"master-port": tc.port, "oversubscription": tc.oversubs} {
				if r := got[n]; r.Status != w.status || !strings.Contains(r.Message, w.in) {
					t.Errorf("%s = %s %q, want %s containing %q", n, r.Status, r.Message, w.status, w.in)
				}
			}
			if tc.name == "bad topology" && got["topology"].Status != Fail {
				t.Errorf("topology = %+v, want fail", got["topology"])
			}
		})
	}
}

func TestProfileCheck(t *testing.T) {
	env := fake{}.env(nil)
	env.ProfileErr = errors.New(`profile "nosuch" not found`)
	got := run(env, "profile", "mpirun", "env-scripts")
	statuses := map[string]Status{}
	for n, r := range got {
		statuses[n] = r.Status
	}
	if diff := cmp.Diff(map[string]Status{"profile": Fail, "mpirun": Skip, "env-scripts": Skip}, statuses); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if !strings.Contains(got["profile"].Fix, "batchkit profile check test") {
		t.Errorf("profile fix = %q", got["profile"].Fix)
	}
}

// A check that ignores its context still ends Run at the deadline.
func TestRunDeadline(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	checks := []Check{
		{"fast", func(context.Context, *Env) Result { return Result{Status: OK, Message: "fine"} }},
		{"stuck", func(context.Context, *Env) Result { <-block; return Result{} }},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	got := Run(ctx, fake{}.env(nil), checks)
	if d := time.Since(start); d > time.Second {
		t.Errorf("Run took %v", d)
	}
	want := []Result{
		{Name: "fast", Status: OK, Message: "fine"},
		{Name: "stuck", Status: Fail, Message: "did not finish within doctor's deadline (context deadline exceeded)",
			Fix: "something on this machine hangs: run the check's command by hand"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
}

// ExecRunner kills the whole process group: a script whose child sleeps
// on with the pipes open does not hold it past the timeout.
func TestExecRunnerTimeout(t *testing.T) {
	env := &Env{Run: ExecRunner, Timeout: 300 * time.Millisecond}
	start := time.Now()
	_, _, err := env.command(context.Background(), Command{Path: "sh", Args: []string{"-c", "sleep 30 & sleep 30"}})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
	var ce *CommandError
	if !errors.As(err, &ce) || ce.TimedOut != 300*time.Millisecond {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if diff := cmp.Diff("sh -c sleep 30 & sleep 30: timed out after 300ms", err.Error()); diff != "" {
		t.Error(diff)
	}
}

func TestWriteText(t *testing.T) {
	var b strings.Builder
	WriteText(&b, []Result{
		{Name: "profile", Status: OK, Message: "local is valid", Fix: "never shown"},
		{Name: "torch", Status: Fail, Message: "torch is missing", Fix: "pip install torch"},
	}, false)
	want := "OK    profile  local is valid\n" +
		"FAIL  torch    torch is missing\n" +
		"               fix: pip install torch\n" +
		"2 checks: 1 ok, 0 warn, 1 fail, 0 skip\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Colour is for a terminal: the status in its colour, and nothing else
// changes; without it, no escape sequence at all (the case above).
func TestWriteTextColor(t *testing.T) {
	var plain, colored strings.Builder
	rs := []Result{{Name: "torch", Status: Fail, Message: "torch is missing", Fix: "pip install torch"}}
	WriteText(&plain, rs, false)
	WriteText(&colored, rs, true)
	if strings.Contains(plain.String(), "\x1b[") {
		t.Errorf("plain output has escapes: %q", plain.String())
	}
	if !strings.Contains(colored.String(), "\x1b[31mFAIL") {
		t.Errorf("coloured output %q lacks a red FAIL", colored.String())
	}
	strip := strings.NewReplacer("\x1b[31m", "", "\x1b[0m", "")
	if got := strip.Replace(colored.String()); !strings.HasPrefix(got, "FAIL") || !strings.Contains(got, "torch is missing") {
		t.Errorf("coloured output, escapes removed: %q", got)
	}
}
