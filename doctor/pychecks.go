package doctor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// bindingsIndex is where Intel publishes oneccl_bind_pt and IPEX wheels.
const bindingsIndex = "https://pytorch-extension.intel.com/release-whl/stable/cpu/us/"

// otherPython is the system interpreter when python3 on PATH is another
// one: the trap of a pyenv, conda or venv python3 without the site's
// torch, or the other way round.
func (env *Env) otherPython(job jobEnv, path string, fromPath bool) string {
	if !fromPath || env.SysPython == "" || env.SameFile(path, env.SysPython) {
		return ""
	}
	if _, err := env.LookPath(env.SysPython, job.path); err != nil {
		return ""
	}
	return env.SysPython
}

func checkPython(ctx context.Context, env *Env) Result {
	job, err := env.job(ctx)
	if err != nil {
		return skip(needsScripts)
	}
	path, fromPath, err := env.interpreter(job)
	if err != nil {
		return result(Fail, "%v", err).fix("install python3, or pass --python PATH")
	}
	other := env.otherPython(job, path, fromPath)
	if other != "" {
		go env.probe(ctx, job, other) // concurrently; the result is cached
	}
	info, err := env.probe(ctx, job, path)
	if err != nil {
		return result(Fail, "%v", err).fix("%s", probeFix(path, err))
	}
	msg := fmt.Sprintf("%s: Python %s (%s)", path, info.Python, info.Executable)
	if other == "" {
		return ok("%s", msg)
	}
	sys, err := env.probe(ctx, job, other)
	switch {
	case err != nil || hasTorch(info) == hasTorch(sys):
		return ok("%s", msg)
	case hasTorch(sys):
		return result(Warn, "python3 on PATH is %s, without torch; %s has torch %s", path, other, sys.Packages["torch"].Version).
			fix("start training with %s (doctor: --python %s), or put the environment with torch first on PATH", other, other)
	}
	return result(Warn, "python3 on PATH (%s) has torch %s; %s has none: scripts run with #!%s or another PATH will not find it",
		path, info.Packages["torch"].Version, other, other).
		fix("start training with %s explicitly", path)
}

// probeFix is the python check's fix for a probe that failed. One that
// timed out is most often a first import of torch from a parallel file
// system with a cold cache (tens of seconds): the fix names --timeout.
func probeFix(python string, err error) string {
	var ce *CommandError
	if errors.As(err, &ce) && ce.TimedOut > 0 {
		return fmt.Sprintf("a first import of torch can take longer than %s (a cold cache on a parallel file system): run doctor again, or give it more time with --timeout %s",
			ce.TimedOut, max(time.Minute, 4*ce.TimedOut))
	}
	return fmt.Sprintf("run %s -c 'import torch' by hand to see where it stops", python)
}

// pythonInfo is the probe of the interpreter under test for the package
// checks; a failure is the python check's (or env-scripts') to report.
func (env *Env) pythonInfo(ctx context.Context) (string, PyInfo, *Result) {
	job, err := env.job(ctx)
	if err != nil {
		r := skip(needsScripts)
		return "", PyInfo{}, &r
	}
	path, _, err := env.interpreter(job)
	if err != nil {
		r := skip("no python (see the python check)")
		return "", PyInfo{}, &r
	}
	info, err := env.probe(ctx, job, path)
	if err != nil {
		r := skip("the python probe failed (see the python check)")
		return "", PyInfo{}, &r
	}
	return path, info, nil
}

func checkTorch(ctx context.Context, env *Env) Result {
	path, info, r := env.pythonInfo(ctx)
	if r != nil {
		return *r
	}
	t := info.Packages["torch"]
	switch {
	case t.Version == "":
		fix := "pip install torch, or pass --python with the interpreter that has it"
		job, _ := env.job(ctx) // pythonInfo had it
		_, fromPath, _ := env.interpreter(job)
		if other := env.otherPython(job, path, fromPath); other != "" {
			if sys, err := env.probe(ctx, job, other); err == nil && hasTorch(sys) {
				fix = fmt.Sprintf("%s has torch %s: use it (--python %s)", other, sys.Packages["torch"].Version, other)
			}
		}
		return result(failIf(needsOneCCL(env.profile())), "torch is not importable by %s: %s", path, t.Error).fix("%s", fix)
	case t.Error != "":
		return result(Fail, "torch %s is installed for %s but does not import: %s", t.Version, path, t.Error).
			fix("reinstall torch: pip install --force-reinstall torch==%s", t.Version)
	}
	return ok("torch %s (%s)", t.Version, filepath.Dir(t.File))
}

// bindings is the installed oneCCL bindings package, under the current
// name or the old one (torch_ccl, before 1.12).
func bindings(info PyInfo) (name string, p Package, found bool) {
	for _, name := range []string{"oneccl_bindings_for_pytorch", "torch_ccl"} {
		if p := info.Packages[name]; p.Version != "" || (p.Error != "" && !p.Missing) {
			return name, p, true
		}
	}
	return "", Package{}, false
}

func checkBindings(ctx context.Context, env *Env) Result {
	path, info, r := env.pythonInfo(ctx)
	if r != nil {
		return *r
	}
	torch := info.Packages["torch"]
	tv, terr := ParseVersion(torch.Version)
	want := "<version matching torch>"
	if terr == nil {
		want = BindingsFor(tv)
	}
	install := fmt.Sprintf("pip install oneccl_bind_pt==%s --extra-index-url %s", want, bindingsIndex)
	name, b, found := bindings(info)
	if !found {
		if needsOneCCL(env.profile()) {
			return result(Fail, "oneccl_bindings_for_pytorch (or torch_ccl) is not installed for %s; profile %s uses oneCCL (PyTorch's ccl backend)",
				path, env.ProfileName).fix("%s", install)
		}
		return skip("oneccl_bindings_for_pytorch is not installed for %s; profile %s does not use oneCCL", path, env.ProfileName).
			fix("for oneCCL collectives: %s", install)
	}
	if terr != nil {
		return skip("%s %s is installed, but there is no torch to match it with", name, b.Version)
	}
	bv, err := ParseVersion(b.Version)
	if err != nil {
		return result(Warn, "%s: %v: cannot match it with torch %s", name, err, torch.Version).fix("%s", install)
	}
	if m, builtFor := MatchBindings(tv, bv); m == Mismatch {
		return result(Fail, "%s %s is built for torch %s, torch is %s%s", name, b.Version, builtFor, torch.Version, importNote(b)).
			fix("%s: bindings built for another torch fail at import with \"Mismatch in kernel C++ signatures\" or undefined symbols", install)
	}
	if b.Error != "" {
		return result(Fail, "%s %s matches torch %s but does not import: %s", name, b.Version, torch.Version, b.Error).
			fix("source oneCCL's env/vars.sh (the profile's env.source) before starting python, so that libccl is found")
	}
	return ok("%s %s matches torch %s", name, b.Version, torch.Version)
}

func importNote(p Package) string {
	if p.Error == "" {
		return ""
	}
	return "; its import fails: " + p.Error
}

func checkIPEX(ctx context.Context, env *Env) Result {
	path, info, r := env.pythonInfo(ctx)
	if r != nil {
		return *r
	}
	x := info.Packages["intel_extension_for_pytorch"]
	if x.Version == "" && (x.Missing || x.Error == "") {
		return skip("intel_extension_for_pytorch is not installed for %s (optional)", path)
	}
	torch := info.Packages["torch"]
	tv, terr := ParseVersion(torch.Version)
	xv, xerr := ParseVersion(x.Version)
	switch {
	case terr != nil:
		return skip("intel_extension_for_pytorch %s is installed, but there is no torch to match it with", x.Version)
	case xerr != nil:
		return result(Warn, "intel_extension_for_pytorch: %v: cannot match it with torch %s", xerr, torch.Version)
	case MatchIPEX(tv, xv) == Mismatch:
		return result(Fail, "intel_extension_for_pytorch %s is for torch %d.%d.*, torch is %s%s",
			x.Version, xv.Major, xv.Minor, torch.Version, importNote(x)).
			fix("install the IPEX release of torch %d.%d (pip install 'intel_extension_for_pytorch==%d.%d.*' --extra-index-url %s), or the torch of IPEX %s",
				tv.Major, tv.Minor, tv.Major, tv.Minor, bindingsIndex, x.Version)
	case x.Error != "":
		return result(Fail, "intel_extension_for_pytorch %s matches torch %s but does not import: %s", x.Version, torch.Version, x.Error).
			fix("source oneAPI's setvars.sh (the profile's env.source) before starting python")
	}
	return ok("intel_extension_for_pytorch %s matches torch %s", x.Version, torch.Version)
}
