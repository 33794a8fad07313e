package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/batchkit/batchkit/internal/printable"
)

// probeScript runs in the interpreter under test, once: it imports each
// package in a try (a failed import is data: "Mismatch in kernel C++
// signatures" is exactly what doctor looks for), takes the version from
// __version__ or, when the import failed, from the installed metadata,
// and prints one JSON object. Imports may print; stdout is kept clean.
const probeScript = `
import json, sys
real, sys.stdout = sys.stdout, sys.stderr
out = {"executable": sys.executable, "python": sys.version.split()[0], "packages": {}}
for mod, dists in [("torch", ["torch"]),
                   ("oneccl_bindings_for_pytorch", ["oneccl_bind_pt", "oneccl-bind-pt"]),
                   ("torch_ccl", ["torch_ccl", "torch-ccl"]),
                   ("intel_extension_for_pytorch", ["intel_extension_for_pytorch", "intel-extension-for-pytorch"])]:
    r = {}
    try:
        m = __import__(mod)
        r["version"] = str(getattr(m, "__version__", "") or "")
        r["file"] = str(getattr(m, "__file__", "") or "")
    except BaseException as e:
        r["error"] = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
        r["missing"] = isinstance(e, ImportError) and getattr(e, "name", None) == mod
    if not r.get("version"):
        try:
            from importlib import metadata
            for d in dists:
                try:
                    r["version"] = metadata.version(d)
                    r["missing"] = False
                    break
                except Exception:
                    pass
        except Exception:
            pass
    out["packages"][mod] = r
real.write(json.dumps(out))
`

// PyInfo is what probeScript reports.
type PyInfo struct {
	Executable string             `json:"executable"`
	Python     string             `json:"python"`
	Packages   map[string]Package `json:"packages"`
}

// Package is one probed package: a version, or why it does not import.
type Package struct {
	Version string `json:"version"`
	File    string `json:"file"`
	Error   string `json:"error"`
	Missing bool   `json:"missing"` // not installed at all
}

// probe runs probeScript in python, in the job's environment, once per
// interpreter; concurrent checks asking for the same interpreter wait for
// the one run.
func (env *Env) probe(ctx context.Context, job jobEnv, python string) (PyInfo, error) {
	info, err := env.probes.do(ctx, python, func() (PyInfo, error) { return env.runProbe(ctx, job, python) })
	if err != nil && err == ctx.Err() { // given up waiting for another check's run

		return PyInfo{}, fmt.Errorf("%s: probe: %w", python, err)
	}
	return info, err
}

// ProbeError is a probe whose output is not the JSON expected.
type ProbeError struct {
	Python string
	Err    error
	Output string
}

func (e *ProbeError) Error() string {
	return fmt.Sprintf("%s: unexpected probe output %s: %v", e.Python, printable.Quote(firstLine(e.Output), maxExcerpt), e.Err)
}

func (e *ProbeError) Unwrap() error { return e.Err }

func (env *Env) runProbe(ctx context.Context, job jobEnv, python string) (PyInfo, error) {
	out, _, err := env.command(ctx, Command{Path: python, Args: []string{"-c", probeScript}, Env: job.environ})
	if err != nil {
		if ce, ok := err.(*CommandError); ok {
			ce.Cmd = python + " (probe of torch, oneCCL bindings, IPEX)"
		}
		return PyInfo{}, err
	}
	var info PyInfo
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &info); err != nil {
		return PyInfo{}, &ProbeError{Python: python, Err: err, Output: out}
	}
	return info, nil
}

// interpreter is the Python under test: --python, else the profile's
// env.python, else python3 on the job's PATH.
func (env *Env) interpreter(job jobEnv) (path string, fromPath bool, err error) {
	name := env.Python
	if p := env.profile(); name == "" && p != nil {
		name = p.Env.Python
	}
	if name == "" {
		name, fromPath = "python3", true
	}
	path, err = env.LookPath(name, job.path)
	if err != nil {
		return "", fromPath, fmt.Errorf("python %q: %w", name, err)
	}
	return path, fromPath, nil
}

func hasTorch(info PyInfo) bool {
	p := info.Packages["torch"]
	return p.Error == "" && p.Version != ""
}
