package envsetup

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/batchkit/batchkit/internal/cmdgroup"
	"github.com/batchkit/batchkit/internal/shquote"
)

// The oneCCL bindings for PyTorch ship their own oneCCL (and Intel MPI) in
// the pip package and an env/setvars.sh that points CCL_ROOT, I_MPI_ROOT,
// FI_PROVIDER_PATH and LD_LIBRARY_PATH at them. Intel's guides source it as
//
//	source $(python -c "import oneccl_bindings_for_pytorch as torch_ccl; print(torch_ccl.cwd)")/env/setvars.sh
//
// (torch_ccl before 1.12, whose package directory holds env/setvars.sh the
// same way). cwd is the package's own directory, so BindingsProbe finds it
// with importlib's find_spec, without importing the package, which would
// import torch (seconds) and fails outright when torch does not match.
const BindingsProbe = `import importlib.util as u, sys; s = u.find_spec("oneccl_bindings_for_pytorch") or u.find_spec("torch_ccl"); print(s.submodule_search_locations[0]) if s and s.submodule_search_locations else sys.exit("` + noBindings + `")`

// noBindings is what BindingsProbe says when neither package is there.
const noBindings = "neither oneccl_bindings_for_pytorch nor torch_ccl is installed for this python"

// BindingsShell is shell text that sources the bindings' env/setvars.sh
// found by python, for scripts (a dry run's lines, the batch script): the
// assignment makes set -e stop at a python that finds no bindings.
func BindingsShell(python string) (string, error) {
	if python == "" {
		python = "python3"
	}
	cmd, err := shquote.Join([]string{python, "-c", BindingsProbe})
	if err != nil {
		return "", err
	}
	return "batchkit_ccl=$(" + cmd + ")\nsource \"$batchkit_ccl/env/setvars.sh\"\n", nil
}

// ErrNoBindings is BindingsScript's error when python has neither
// oneccl_bindings_for_pytorch nor torch_ccl.
var ErrNoBindings = errors.New("neither oneccl_bindings_for_pytorch nor torch_ccl is installed for it (pip install oneccl_bind_pt, for the torch it has)")

// SourceEnv sources scripts as Source does and then, with bindings, the
// oneCCL bindings' env/setvars.sh, found by python in the environment the
// scripts left (the guides' order: setvars.sh may be what puts the right
// python first on PATH). The changes are the whole of it, relative to
// environ; on any failure there are none. r.Timeout bounds it all, the
// scripts, the python and the bindings' script together.
func (r Runner) SourceEnv(ctx context.Context, environ []string, scripts []Script, bindings bool, python string) (Changes, error) {
	if !bindings {
		return r.Source(ctx, environ, scripts)
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(r.Timeout, DefaultTimeout))
	defer cancel()
	ch, err := r.Source(ctx, environ, scripts)
	if err != nil {
		return ch, err
	}
	after := Apply(environ, ch)
	s, err := BindingsScript(ctx, after, python, r.Timeout)
	if err != nil {
		return Changes{}, err
	}
	more, err := r.Source(ctx, after, []Script{s})
	if err != nil {
		return Changes{}, err
	}
	return Diff(Environ(environ), Environ(Apply(after, more))), nil
}

// BindingsScript is the oneCCL bindings' env/setvars.sh for the Python
// interpreter python ("" is python3), looked up on environ's PATH and run
// with environ, within timeout (0: DefaultTimeout). The error names the
// interpreter.
func BindingsScript(ctx context.Context, environ []string, python string, timeout time.Duration) (Script, error) {
	if python == "" {
		python = "python3"
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	path, err := LookPath(python, Environ(environ)["PATH"])
	if err != nil {
		return Script{}, fmt.Errorf("finding the oneCCL bindings: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-c", BindingsProbe)
	cmd.Env = environ
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmdgroup.Bound(cmd, time.Second)
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return Script{}, fmt.Errorf("finding the oneCCL bindings with %s: %w after %v", python, ErrTimeout, timeout)
	case errors.As(err, &ee) && strings.TrimSpace(stderr.String()) == noBindings:
		return Script{}, fmt.Errorf("finding the oneCCL bindings with %s: %w", python, ErrNoBindings)
	case err != nil:
		return Script{}, fmt.Errorf("finding the oneCCL bindings with %s: %w%s", python, err, lastLine(stderr.String()))
	}
	dir := strings.TrimSpace(stdout.String())
	if !filepath.IsAbs(dir) {
		return Script{}, fmt.Errorf("finding the oneCCL bindings with %s: it printed %q, not a directory", python, dir)
	}
	return Script{Path: filepath.Join(dir, "env", "setvars.sh")}, nil
}

// LookPath finds file as a shell would with PATH set to path: the PATH a
// program started in the sourced environment searches, not this process's.
func LookPath(file, path string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found on PATH %q", file, path)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	return ": " + s[strings.LastIndexByte(s, '\n')+1:]
}
