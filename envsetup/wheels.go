package envsetup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The Intel MPI and oneCCL wheels (impi-rt, impi-devel, oneccl-cpu) install
// into a Python prefix (a venv or a conda environment) and ship no vars.sh:
// only conda activate.d hooks, which a venv never runs. What those hooks and
// the libraries need is set from the prefix alone (docs/intel-wheels.md):
//
//	I_MPI_ROOT        PREFIX              Intel MPI's mpirun script and oneCCL's mpi transport
//	CCL_ROOT          PREFIX              oneCCL
//	FI_PROVIDER_PATH  PREFIX/lib          libfabric's providers (lib*-fi.so) sit in lib/
//	PATH              PREFIX/bin/libfabric:PREFIX/bin:...   bin/fi_info is a broken wrapper; the real one first
//	LD_LIBRARY_PATH   PREFIX/lib:...      libmpi.so.12, libfabric.so.1, libccl.so.1 (nothing has a RUNPATH)
//
// A profile names the prefix with env.intel_wheels; sourced like a script,
// after env.source, so env.vars and the user's exported values of those
// names still win over it.

// WheelsActive is env.intel_wheels' value that means the user's activated
// virtual environment ($VIRTUAL_ENV when batchkit runs).
const WheelsActive = "$VIRTUAL_ENV"

// wheelVars are the variables set to a path under the prefix; wheelLists
// the lists the prefix's directories go in front of, in this order.
var (
	wheelVars = []struct{ name, sub string }{
		{"I_MPI_ROOT", ""}, {"CCL_ROOT", ""}, {"FI_PROVIDER_PATH", "lib"},
	}
	wheelLists = []struct {
		name string
		subs []string
	}{
		{"PATH", []string{"bin/libfabric", "bin"}},
		{"LD_LIBRARY_PATH", []string{"lib"}},
	}
)

// wheelFiles must exist in a prefix with the Intel MPI wheel installed: a
// half-installed or half-removed one lacks some (pip install stopped, a
// second pip uninstall of impi-devel that took impi-rt's files).
var wheelFiles = []struct{ path, wheel string }{
	{"bin/mpiexec.hydra", "impi-rt"},
	{"bin/hydra_pmi_proxy", "impi-rt"},
	{"bin/hydra_bstrap_proxy", "impi-rt"},
	{"lib/libmpi.so.12", "impi-rt"},
	{"lib/libfabric.so.1", "impi-rt"},
}

// ErrNoVenv is WheelsPrefix's error for "$VIRTUAL_ENV" with no venv active.
var ErrNoVenv = errors.New(`env.intel_wheels is "$VIRTUAL_ENV", but no virtual environment is active: activate the one the Intel MPI wheels are installed in (. VENV/bin/activate), or set env.intel_wheels to its path`)

// WheelsPrefix is the prefix env.intel_wheels names, given the user's
// VIRTUAL_ENV, checked to hold the Intel MPI wheel: one error naming the
// cause and the fix.
func WheelsPrefix(value, virtualEnv string) (string, error) {
	prefix := value
	if value == WheelsActive {
		if virtualEnv == "" {
			return "", ErrNoVenv
		}
		prefix = virtualEnv
	}
	prefix = filepath.Clean(prefix)
	if !filepath.IsAbs(prefix) {
		return "", fmt.Errorf("env.intel_wheels %q: want an absolute path or %s", value, WheelsActive)
	}
	if fi, err := os.Stat(prefix); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("env.intel_wheels: %s is not a directory: create the environment and install the wheels there (python3 -m venv %s && %s/bin/pip install impi-rt oneccl-cpu), or point env.intel_wheels at the right one", prefix, prefix, prefix)
	}
	for _, f := range wheelFiles {
		if _, err := os.Stat(filepath.Join(prefix, f.path)); err != nil {
			return "", fmt.Errorf("env.intel_wheels: %s has no %s: the %s wheel is missing or half-installed there (%s/bin/pip install --force-reinstall %s)", prefix, f.path, f.wheel, prefix, f.wheel)
		}
	}
	return prefix, nil
}

// WheelsChanges is what the wheels in prefix set, over environ (the
// environment the profile's scripts left): the variables, and the
// prefix's directories in front of PATH and LD_LIBRARY_PATH, once.
func WheelsChanges(prefix string, environ map[string]string) Changes {
	c := Changes{Set: map[string]string{}, Unset: []string{}}
	for _, v := range wheelVars {
		c.Set[v.name] = filepath.Join(prefix, v.sub)
	}
	for _, l := range wheelLists {
		var front []string
		for _, s := range l.subs {
			front = append(front, filepath.Join(prefix, s))
		}
		list := strings.Join(front, ":")
		if old := environ[l.name]; old != "" {
			list += ":" + old
		}
		c.Set[l.name] = dedupe(list)
	}
	return c
}

// WheelsShell is shell text that does what WheelsChanges does, for a dry
// run's lines; the batch template's batchkit_wheels function is the same
// (TestWheelsShellMatchesTemplate).
func WheelsShell(prefix string, quote func(string) (string, error)) (string, error) {
	q, err := quote(prefix)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("batchkit_wheels=" + q + "\n")
	var names []string
	for _, v := range wheelVars {
		val := "$batchkit_wheels"
		if v.sub != "" {
			val += "/" + v.sub
		}
		names = append(names, v.name+"="+val)
	}
	b.WriteString("export " + strings.Join(names, " ") + "\n")
	for _, l := range wheelLists {
		var front []string
		for _, s := range l.subs {
			front = append(front, "$batchkit_wheels/"+s)
		}
		fmt.Fprintf(&b, "export %s=%s${%s:+:$%s}\n", l.name, strings.Join(front, ":"), l.name, l.name)
	}
	return b.String(), nil
}

// SourceWithWheels is SourceEnv, then, with a wheels prefix (WheelsPrefix's
// answer; "" for none), the wheels' variables over what the scripts left:
// the whole set-up of a profile's environment before its own variables, as
// a job, `batchkit envsetup` and doctor see it.
func (r Runner) SourceWithWheels(ctx context.Context, environ []string, scripts []Script, bindings bool, python, wheels string) (Changes, error) {
	sourced, err := r.SourceEnv(ctx, environ, scripts, bindings, python)
	if err != nil || wheels == "" {
		return sourced, err
	}
	after := Apply(environ, sourced)
	more := WheelsChanges(wheels, Environ(after))
	return Diff(Environ(environ), Environ(Apply(after, more))), nil
}
