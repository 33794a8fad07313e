package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/profile"
)

// The Intel stack's checks: Intel MPI's library and launcher, oneCCL's
// library and transport, libfabric's providers, each in the environment a
// rank gets (the profile's scripts, then its variables), as the loader of
// that environment finds them (libs.go). Their bad cases are one line with
// the fix each: a library that is not found or does not load, a wheel with
// files missing, a launcher of another install than the library, oneCCL's
// mpi transport without I_MPI_ROOT, a provider FI_PROVIDER names that
// libfabric does not have.
//
// They run when the profile's flavor is intelmpi, it configures oneCCL, or
// the environment has an Intel stack (I_MPI_ROOT, CCL_ROOT); otherwise they
// leave no line at all: an Open MPI site has nothing to read there.

// The wheels scripts/intel-wheels.txt pins, named in fixes
// (TestPinnedWheels keeps them equal).
const (
	pinnedIMPI = "2021.18.1"
	pinnedCCL  = "2021.16.1"
)

// cclMPIRootError is what oneCCL 2021.16 logs, and why it stops, when its
// transport is mpi and neither variable is set.
const cclMPIRootError = "CCL/MPI uses Intel(R) MPI Library but neither I_MPI_ROOT nor ONEAPI_ROOT is set. Please source release version of Intel(R) MPI Library (2019 or higher version)."

// rankEnv is the environment a rank of the job starts with, and which of
// the Intel checks apply to it.
type rankEnv struct {
	environ []string
	vars    map[string]string
	path    string // its PATH, to look programs up on

	intelMPI bool // the profile's flavor is intelmpi: a problem is a FAIL
	oneCCL   bool // the profile configures oneCCL: a problem is a FAIL
	mpiCheck bool // the intel-mpi check applies
	cclCheck bool // the oneccl check applies
}

// notApplicable leaves no line: the check is about a stack this profile
// and environment do not have.
func notApplicable(format string, a ...any) Result {
	return result(notHere, format, a...)
}

const notIntel = "neither the profile nor the environment uses Intel MPI or oneCCL"

// rank is the job's environment (env.job) with the profile's variables
// over it, a variable the user exported keeping the user's value
// (envsetup.WithVars).
func (env *Env) rank(ctx context.Context) (rankEnv, *Result) {
	p := env.profile()
	if p == nil {
		r := notApplicable("needs a valid profile")
		return rankEnv{}, &r
	}
	r := rankEnv{intelMPI: p.MPI.Flavor == mpirun.IntelMPI, oneCCL: needsOneCCL(p)}
	job, err := env.job(ctx)
	if err != nil {
		res := skip(needsScripts)
		if !r.intelMPI && !r.oneCCL {
			res = notApplicable(needsScripts)
		}
		return rankEnv{}, &res
	}
	base := job.environ
	if base == nil {
		base = env.Environ()
	}
	user := envsetup.Environ(env.Environ())
	r.vars = envsetup.Environ(base)
	for k, v := range p.Env.Vars {
		if uv, had := user[k]; had {
			v = uv
		}
		r.vars[k] = v
	}
	for k, v := range r.vars {
		r.environ = append(r.environ, k+"="+v)
	}
	sort.Strings(r.environ)
	r.path = r.vars["PATH"]
	r.mpiCheck = r.intelMPI || r.vars["I_MPI_ROOT"] != ""
	r.cclCheck = r.oneCCL || r.vars["CCL_ROOT"] != ""
	return r, nil
}

// where says where the loader looked, for a library it did not find.
func (r rankEnv) where() string {
	if ld := r.vars["LD_LIBRARY_PATH"]; ld != "" {
		return "not in LD_LIBRARY_PATH=" + ld + ", the loader cache or the default directories"
	}
	return "LD_LIBRARY_PATH is unset, and it is not in the loader cache or the default directories"
}

// near is a directory where a library not found may be, and why it
// would be there.
type near struct{ dir, why string }

// rootDirs are the directories under the install root variable names.
func (r rankEnv) rootDirs(rootVar string, subs ...string) []near {
	root := r.vars[rootVar]
	if root == "" {
		return nil
	}
	var out []near
	for _, sub := range subs {
		out = append(out, near{filepath.Join(root, sub), "under " + rootVar})
	}
	return out
}

// launcherLib is the lib directory beside the bin directory of the
// launcher on the job's PATH: a venv's or an install's.
func (env *Env) launcherLib(r rankEnv) []near {
	name := launcherName(env.profile())
	if name == "" {
		name = "mpiexec"
	}
	lp, err := env.LookPath(name, r.path)
	if err != nil {
		return nil
	}
	return []near{{filepath.Join(filepath.Dir(filepath.Dir(lp)), "lib"), "beside " + lp}}
}

// notFound is the verdict on a library the loader does not find: when it
// is in one of the places its install would put it, the one missing step
// is named.
func (r rankEnv) notFound(name string, places []near, status Status, install string) Result {
	for _, n := range places {
		if p := filepath.Join(n.dir, name); hostELF(p) {
			return result(status, "%s is in %s (%s) but a job's loader does not find it: %s", name, n.dir, n.why, r.where()).
				fix("export LD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} (an install's env/vars.sh does it; pip wheels ship none: name the venv in the profile's env.intel_wheels, docs/intel-wheels.md)", n.dir)
		}
	}
	return result(status, "%s is not found: %s", name, r.where()).fix("%s", install)
}

var (
	installIMPI = fmt.Sprintf("source Intel MPI's env/vars.sh (oneAPI's setvars.sh) in the profile's env.source, or install the wheel into a venv (pip install impi-rt==%s; scripts/intel-stack.sh install) and name it in env.intel_wheels", pinnedIMPI)
	installCCL  = fmt.Sprintf("source oneCCL's env/vars.sh in the profile's env.source, or install the wheel into a venv (pip install oneccl-cpu==%s; scripts/intel-stack.sh install) and name it in env.intel_wheels", pinnedCCL)
)

// halfInstalled is the verdict on a wheel whose files are not all there.
func halfInstalled(w wheel, gone []string, status Status) Result {
	return result(status, "%s in %s is half-installed: %s %s missing", w, w.prefix, listSome(gone), plural2(len(gone), "is", "are")).
		fix("reinstall it: %s", w.reinstall())
}

func plural2(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// wheelNote names the wheel a library came from, for messages.
func wheelNote(w wheel, ok bool) string {
	if !ok {
		return ""
	}
	return ", wheel " + w.String()
}

// loadFailure is the verdict on a library that does not load (a
// *LoadError), or that ldd could not check (a WARN: nothing is known to be
// wrong).
func loadFailure(l lib, note string, err error, status Status) Result {
	var le *LoadError
	if !errors.As(err, &le) {
		return result(Warn, "%s from %s (%s%s): %v", l.name, l.dir(), l.via, note, err).
			fix("run ldd %s by hand in the job's environment: every library it lists must be found", l.path)
	}
	what := le.Msg
	if len(le.Missing) > 0 {
		what = fmt.Sprintf("it needs %s, not found", strings.Join(le.Missing, ", "))
	}
	return result(status, "%s from %s (%s%s) cannot be loaded: %s", l.name, l.dir(), l.via, note, what).
		fix("install what provides %s, or put its directory on LD_LIBRARY_PATH (ldd %s lists what is missing)",
			strings.Join(le.Missing, ", "), l.path)
}

// launcherName is the program the profile starts ranks with, "" for srun.
func launcherName(p *profile.Profile) string {
	if p.MPI.Launcher == mpirun.ProgramSrun {
		return ""
	}
	if p.MPI.Binary != "" {
		return p.MPI.Binary
	}
	if p.MPI.Launcher != "" {
		return string(p.MPI.Launcher)
	}
	return string(mpirun.ProgramMpirun)
}

// locate finds library name as a job's loader would and, when a pip wheel
// (one of wheels, by its dist-info name) installed it, checks every file
// of the wheel is there. The note says where it came from, for messages;
// a non-nil Result is the check's answer: not found (places, computed only
// then, are where it was looked for beside) or half-installed.
func (env *Env) locate(ctx context.Context, r rankEnv, name string, status Status, install string, places func() []near, wheels ...string) (lib, string, *Result) {
	l, found := env.findLib(ctx, name, r.vars)
	if !found {
		res := r.notFound(name, places(), status, install)
		return lib{}, "", &res
	}
	w, isWheel := wheelOf(l.path, wheels...)
	if isWheel {
		if gone := w.missing(); len(gone) > 0 {
			res := halfInstalled(w, gone, status)
			return lib{}, "", &res
		}
	}
	return l, wheelNote(w, isWheel), nil
}

func checkIntelMPI(ctx context.Context, env *Env) Result {
	r, res := env.rank(ctx)
	if res != nil {
		return *res
	}
	if !r.mpiCheck {
		return notApplicable(notIntel)
	}
	status := failIf(r.intelMPI)
	l, note, res := env.locate(ctx, r, "libmpi.so.12", status, installIMPI, func() []near {
		return append(r.rootDirs("I_MPI_ROOT", "lib", "lib/release"), env.launcherLib(r)...)
	}, "impi_rt")
	if res != nil {
		return *res
	}
	if err := env.loads(ctx, l, r.environ, r.path); err != nil {
		return loadFailure(l, note, err, status)
	}
	data, err := elfData(l.path)
	if err != nil {
		return result(Warn, "libmpi.so.12 from %s (%s%s) loads, but cannot be read: %v", l.dir(), l.via, note, err)
	}
	v, known := impiLibVersion(data)
	if !known {
		return result(status, "libmpi.so.12 from %s (%s%s) loads, but has no Intel MPI version in it: another MPI's library (MPICH's has that name too)?", l.dir(), l.via, note).
			fix("put Intel MPI's lib directory first on LD_LIBRARY_PATH (its env/vars.sh does)")
	}
	msg := fmt.Sprintf("Intel MPI %s: libmpi.so.12 from %s (%s%s) loads", v, l.dir(), l.via, note)
	name := launcherName(env.profile())
	if name == "" {
		return ok("%s; ranks start with srun", msg)
	}
	lp, err := env.LookPath(name, r.path)
	if err != nil {
		return ok("%s; no %s on the job's PATH to compare (see the mpirun check)", msg, name)
	}
	out, stderr, _ := env.command(ctx, Command{Path: lp, Args: []string{"--version"}, Env: r.environ})
	lv, known := impiLauncherVersion(out + "\n" + stderr)
	if !known {
		return ok("%s; %s (%s) does not say it is Intel MPI's launcher (see the mpirun check)", msg, name, lp)
	}
	if !lv.Same(v) {
		return result(status, "%s from %s is Intel MPI %s but libmpi.so.12 from %s is %s: put one install first on PATH and LD_LIBRARY_PATH",
			name, filepath.Dir(lp), lv, l.dir(), v).fix("%s", sameInstallFix(name, lp, l))
	}
	return ok("%s; %s (%s) is the same build", msg, name, lp)
}

// sameInstallFix names the two ways to one install: the library's
// launcher first on PATH, or the launcher's library first on
// LD_LIBRARY_PATH, where each exists.
func sameInstallFix(name, launcher string, l lib) string {
	var ways []string
	if bin := filepath.Join(filepath.Dir(l.dir()), "bin"); isFile(filepath.Join(bin, filepath.Base(name))) {
		ways = append(ways, fmt.Sprintf("export PATH=%s:$PATH (the library's launcher)", bin))
	}
	if libdir := filepath.Join(filepath.Dir(filepath.Dir(launcher)), "lib"); isFile(filepath.Join(libdir, l.name)) {
		ways = append(ways, fmt.Sprintf("export LD_LIBRARY_PATH=%s:$LD_LIBRARY_PATH (the launcher's library)", libdir))
	}
	if len(ways) == 0 {
		return "source one Intel MPI install's env/vars.sh (or name one venv in env.intel_wheels), and remove the other from PATH and LD_LIBRARY_PATH"
	}
	return strings.Join(ways, ", or ") + "; a job sees what the profile's env.source, env.intel_wheels and env.vars set"
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func checkOneCCL(ctx context.Context, env *Env) Result {
	r, res := env.rank(ctx)
	if res != nil {
		return *res
	}
	if !r.cclCheck {
		return notApplicable(notIntel)
	}
	status := failIf(r.oneCCL)
	l, note, res := env.locate(ctx, r, "libccl.so.1", status, installCCL, func() []near {
		return append(r.rootDirs("CCL_ROOT", "lib", "lib/cpu"), env.launcherLib(r)...)
	}, "oneccl_cpu", "oneccl")
	if res != nil {
		return *res
	}
	if err := env.loads(ctx, l, r.environ, r.path); err != nil {
		if le := (*LoadError)(nil); errors.As(err, &le) && slices.Contains(le.Missing, "libccl.so.2") {
			return result(status, "libccl.so.1 from %s (%s%s) cannot be loaded: it needs libccl.so.2, not found (oneccl-cpu 2021.17 through 2022.2 ship a libccl.so.1 that needs it; only the SYCL wheel oneccl has it)",
				l.dir(), l.via, note).
				fix("pip install oneccl-cpu==%s (the newest CPU wheel whose libccl.so.1 loads alone), or install the SYCL oneccl wheel", pinnedCCL)
		}
		return loadFailure(l, note, err, status)
	}
	msg := fmt.Sprintf("libccl.so.1 from %s (%s%s) loads", l.dir(), l.via, note)
	data, err := elfData(l.path)
	fileV, full, known := "", "", false
	if err == nil {
		fileV, full, known = cclLibVersion(data)
	}
	var own string
	if env.CCLVersion != nil {
		if v := env.CCLVersion(); v != "" && v != "unknown" {
			own = v
		}
	}
	switch {
	case own != "" && known && own != fileV:
		return result(Warn, "this binary runs on oneCCL %s (its ccl::get_library_version), but %s is oneCCL %s (%s): a job's other programs (python's bindings) load that one",
			own, msg, fileV, full).
			fix("build bin/batchkit-ccl against the job's oneCCL (make build-ccl with BATCHKIT_INTEL_PREFIX set to its prefix), or put the oneCCL it was built with first on LD_LIBRARY_PATH")
	case own != "":
		msg = fmt.Sprintf("oneCCL %s (ccl::get_library_version): %s", own, msg)
	case known:
		msg = fmt.Sprintf("oneCCL %s (the library's version string %s): %s", fileV, clip(full), msg)
	default:
		msg = "oneCCL of unknown version (no version string in the library): " + msg
	}
	if bad := env.cclTransport(ctx, r); bad != nil {
		return *bad
	}
	return ok("%s; transport %s", msg, transportNote(r))
}

// clip bounds a string read from a library for a message.
func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// cclTransport checks what oneCCL's transport needs at initialisation:
// mpi needs I_MPI_ROOT (or ONEAPI_ROOT) and libmpi.so.12, ofi needs
// libfabric.so (oneCCL dlopens the unversioned name). Unset, oneCCL 2021.16
// takes mpi under an MPI launcher and ofi otherwise.
func (env *Env) cclTransport(ctx context.Context, r rankEnv) *Result {
	t := r.vars["CCL_ATL_TRANSPORT"]
	underMPI := launcherName(env.profile()) != "" && r.intelMPI
	if t == "mpi" || (t == "" && underMPI) {
		status := Fail
		if t == "" {
			status = Warn // pinning (BATCHKIT_PIN) may set ofi
		}
		if r.vars["I_MPI_ROOT"] == "" && r.vars["ONEAPI_ROOT"] == "" {
			ri := result(status, "oneCCL's transport is mpi (%s), but neither I_MPI_ROOT nor ONEAPI_ROOT is set: oneCCL stops with %q",
				transportNote(r), cclMPIRootError).
				fix("export I_MPI_ROOT=<Intel MPI's prefix> (its env/vars.sh does; for pip wheels env.intel_wheels sets it), or CCL_ATL_TRANSPORT=ofi")
			return &ri
		}
		if _, found := env.findLib(ctx, "libmpi.so.12", r.vars); !found {
			ri := result(status, "oneCCL's transport is mpi (%s), but libmpi.so.12 is not found (%s): oneCCL logs \"could not open the library: libmpi.so.12\"",
				transportNote(r), r.where()).fix("%s", installIMPI)
			return &ri
		}
	}
	if t != "mpi" {
		if _, found := env.findLib(ctx, "libfabric.so", r.vars); !found {
			status := failIf(r.oneCCL)
			ri := result(status, "oneCCL's ofi transport opens libfabric.so, which a job's loader does not find (%s): oneCCL logs \"could not open the library: libfabric.so\" and stops with \"could not initialize any transport library\"",
				r.where()).
				fix("put the directory of the libfabric.so (next to libfabric.so.1) of Intel MPI or oneCCL first on LD_LIBRARY_PATH (their env/vars.sh do; for pip wheels env.intel_wheels does)")
			return &ri
		}
	}
	return nil
}

func transportNote(r rankEnv) string {
	if t := r.vars["CCL_ATL_TRANSPORT"]; t != "" {
		return "CCL_ATL_TRANSPORT=" + t
	}
	return "CCL_ATL_TRANSPORT unset: mpi under an MPI launcher, else ofi"
}

func checkLibfabric(ctx context.Context, env *Env) Result {
	r, res := env.rank(ctx)
	if res != nil {
		return *res
	}
	if !r.mpiCheck && !r.cclCheck {
		return notApplicable(notIntel)
	}
	status := failIf(r.intelMPI || r.oneCCL)
	l, found := env.findLib(ctx, "libfabric.so.1", r.vars)
	if !found {
		return r.notFound("libfabric.so.1", append(r.rootDirs("I_MPI_ROOT", "lib", "opt/mpi/libfabric/lib", "libfabric/lib"), env.launcherLib(r)...), status, installIMPI)
	}
	if err := env.loads(ctx, l, r.environ, r.path); err != nil {
		return loadFailure(l, "", err, status)
	}
	// Intel MPI ships its libfabric next to libmpi.so.12 (the wheels) or
	// under it (oneAPI): another one found first (the system's, older) is
	// not what it was built and tested with.
	if own := env.impiFabricDir(ctx, r); own != "" && !sameDir(own, l.dir()) {
		return result(Warn, "the libfabric.so.1 a job loads is %s (%s), not the one of Intel MPI in %s", l.path, l.via, own).
			fix("put %s first on LD_LIBRARY_PATH", own)
	}
	fi := fiInfo(l, r)
	if fi == "" {
		return result(Warn, "libfabric.so.1 from %s (%s): no fi_info next to it or on PATH to list its providers", l.dir(), l.via).
			fix("run fi_info -l of that libfabric in the job's environment by hand")
	}
	ver, _, _ := env.command(ctx, Command{Path: fi, Args: []string{"--version"}, Env: r.environ})
	version := fabricVersion(ver)
	out, stderr, err := env.command(ctx, Command{Path: fi, Args: []string{"-l"}, Env: r.environ})
	if err != nil {
		msg := lastLine(stderr)
		if msg == "" {
			msg = err.Error()
		}
		return result(status, "%s -l does not run with the libfabric.so.1 a job loads (%s, %s): %s", fi, l.path, l.via, msg).
			fix("run fi_info -l in the job's environment by hand: a libfabric provider or library is broken")
	}
	provs := parseProviders(out)
	from := fmt.Sprintf("libfabric%s from %s (%s)", version, l.dir(), l.via)
	pathNote := "FI_PROVIDER_PATH unset"
	if pp := r.vars["FI_PROVIDER_PATH"]; pp != "" {
		pathNote = "FI_PROVIDER_PATH=" + pp
	}
	want := r.vars["FI_PROVIDER"]
	for _, p := range wantedProviders(want) {
		if !hasProvider(provs, p) {
			return result(status, "FI_PROVIDER=%s, but %s has no %s provider here (%s; fi_info -l lists %s)", want, from, p, pathNote, strings.Join(provs, ", ")).
				fix("%s", providerFix(p, l.dir(), r.vars["FI_PROVIDER_PATH"]))
		}
	}
	chosen := "FI_PROVIDER unset: libfabric picks one"
	if want != "" {
		chosen = "FI_PROVIDER=" + want + " is among them"
	}
	return ok("%s: providers %s (%s); %s", from, strings.Join(provs, ", "), pathNote, chosen)
}

func sameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// impiFabricDir is the directory of Intel MPI's own libfabric.so.1: next
// to the libmpi.so.12 a job loads (the wheels), under its install
// (oneAPI's opt/mpi/libfabric/lib), under I_MPI_ROOT, or beside the
// launcher; "" when none.
func (env *Env) impiFabricDir(ctx context.Context, r rankEnv) string {
	var roots []string
	if m, ok := env.findLib(ctx, "libmpi.so.12", r.vars); ok {
		roots = append(roots, m.dir(), filepath.Join(filepath.Dir(m.dir()), "opt/mpi/libfabric/lib"))
	}
	if root := r.vars["I_MPI_ROOT"]; root != "" {
		for _, sub := range []string{"lib", "opt/mpi/libfabric/lib", "libfabric/lib"} {
			roots = append(roots, filepath.Join(root, sub))
		}
	}
	for _, n := range env.launcherLib(r) {
		roots = append(roots, n.dir)
	}
	for _, dir := range roots {
		if hostELF(filepath.Join(dir, "libfabric.so.1")) {
			return dir
		}
	}
	return ""
}

// fiInfo is the fi_info of libfabric l: the wheels' bin/libfabric/fi_info
// (their bin/fi_info is a wrapper script that runs another), oneAPI's
// libfabric/bin/fi_info, else the first fi_info binary on the job's PATH.
func fiInfo(l lib, r rankEnv) string {
	up := filepath.Dir(l.dir())
	for _, p := range []string{filepath.Join(up, "bin", "libfabric", "fi_info"), filepath.Join(up, "bin", "fi_info")} {
		if hostELF(p) {
			return p
		}
	}
	for _, dir := range filepath.SplitList(r.path) {
		if p := filepath.Join(dir, "fi_info"); dir != "" && hostELF(p) {
			return p
		}
	}
	return ""
}

// fabricVersion is " 2.4.0-impi" from fi_info --version's "libfabric: 2.4.0-impi".
func fabricVersion(out string) string {
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "libfabric:"); ok {
			return " " + strings.TrimSpace(v)
		}
	}
	return ""
}

// parseProviders reads fi_info -l: a "name:" line per provider, its
// details indented under it; a provider of two versions is listed twice.
func parseProviders(out string) []string {
	var provs []string
	for line := range strings.Lines(out) {
		if line == "" || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		name, ok := strings.CutSuffix(strings.TrimSpace(line), ":")
		if ok && name != "" && !slices.Contains(provs, name) {
			provs = append(provs, name)
		}
	}
	return provs
}

// wantedProviders are the providers FI_PROVIDER asks for: a comma list,
// "verbs;ofi_rxm" a layered pair; a ^name excludes and asks for none.
func wantedProviders(v string) []string {
	var want []string
	for _, part := range strings.Split(v, ",") {
		for _, p := range strings.Split(part, ";") {
			if p = strings.TrimSpace(p); p != "" && !strings.HasPrefix(p, "^") {
				want = append(want, p)
			}
		}
	}
	return want
}

// hasProvider: fi_info names the utility providers ofi_rxm, ofi_rxd; users
// write rxm too.
func hasProvider(provs []string, p string) bool {
	return slices.Contains(provs, p) || slices.Contains(provs, "ofi_"+p) || slices.Contains(provs, strings.TrimPrefix(p, "ofi_"))
}

// providerFix says what to do about a provider libfabric does not list:
// point FI_PROVIDER_PATH at the directory that has it, or pick another.
func providerFix(p, libDir, providerPath string) string {
	find := func(dir string) string {
		for _, pat := range []string{"lib" + p + "-fi.so", "lib" + p + "-*-fi.so"} {
			if m, _ := filepath.Glob(filepath.Join(dir, pat)); len(m) > 0 {
				return m[0]
			}
		}
		return ""
	}
	inPath := false
	for _, d := range filepath.SplitList(providerPath) {
		if d != "" && sameDir(d, libDir) {
			inPath = true
		}
		if f := find(d); d != "" && f != "" {
			return fmt.Sprintf("%s is there but the %s provider did not come up on this node (no such device, or a library it needs is missing: FI_LOG_LEVEL=warn fi_info -p %s says which): use this network's provider, e.g. FI_PROVIDER=tcp, which works on any network", f, p, p)
		}
	}
	if f := find(libDir); f != "" && !inPath {
		return fmt.Sprintf("export FI_PROVIDER_PATH=%s (libfabric loads %s from there)", libDir, filepath.Base(f))
	}
	return fmt.Sprintf("set FI_PROVIDER to one of those (tcp works on any network) in the profile's env.vars, or install libfabric's %s provider", p)
}
