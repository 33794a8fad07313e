package doctor

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
)

// Shared libraries as a job's processes would load them. Finding one is
// done here, in Go, in the loader's order for a name dlopen'ed or NEEDED by
// a program without RPATH (ld.so(8)): each directory of LD_LIBRARY_PATH,
// then the loader's cache (ldconfig -p), then the default directories, each
// candidate skipped when it is not an ELF object of this machine. Whether
// it loads is asked of the loader itself: ldd, in the job's environment,
// lists every NEEDED library it resolves and "not found" for the others.
// Re-implementing the resolution of NEEDED (RUNPATH, $ORIGIN, hwcaps
// subdirectories, the cache's format) would be a second loader that can
// disagree with the real one; ldd cannot, and it only traces (it runs no
// code of the library). Versions are read from the library's data
// sections (debug/elf): no cgo, nothing of the library runs.

// lib is a shared library found for a job.
type lib struct {
	name string // the name asked for: libmpi.so.12
	path string // where it was found
	via  string // "LD_LIBRARY_PATH", "the loader cache", "a default directory"
}

// dir is the directory the library was found in.
func (l lib) dir() string { return filepath.Dir(l.path) }

// DefaultLibDirs are the loader's built-in directories, searched after its
// cache (System sets them; a test's Env has none).
var DefaultLibDirs = []string{"/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// findLib looks name up as the loader would for a process with the
// environment vars; found is false when no directory has it.
func (env *Env) findLib(ctx context.Context, name string, vars map[string]string) (l lib, found bool) {
	for _, dir := range filepath.SplitList(vars["LD_LIBRARY_PATH"]) {
		if dir == "" {
			continue
		}
		if p := filepath.Join(dir, name); hostELF(p) {
			return lib{name, p, "LD_LIBRARY_PATH"}, true
		}
	}
	for _, p := range env.ldcache(ctx)[name] {
		if hostELF(p) {
			return lib{name, p, "the loader cache"}, true
		}
	}
	for _, dir := range env.LibDirs {
		if p := filepath.Join(dir, name); hostELF(p) {
			return lib{name, p, "a default directory"}, true
		}
	}
	return lib{}, false
}

// ldcache is ldconfig -p's map from a library name to its paths, once per
// doctor run; empty when ldconfig is not found or fails (the default
// directories are searched anyway).
func (env *Env) ldcache(ctx context.Context) map[string][]string {
	m, _ := env.ldcaches.do(ctx, "", func() (map[string][]string, error) {
		path, err := env.LookPath("ldconfig", "/sbin:/usr/sbin:/usr/bin:/bin")
		if err != nil {
			return nil, err
		}
		out, _, err := env.command(ctx, Command{Path: path, Args: []string{"-p"}})
		if err != nil {
			return nil, err
		}
		return parseLdconfig(out), nil
	})
	return m
}

// parseLdconfig reads ldconfig -p:
//
//	libmpi.so.12 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libmpi.so.12
func parseLdconfig(out string) map[string][]string {
	m := map[string][]string{}
	for line := range strings.Lines(out) {
		left, path, ok := strings.Cut(line, " => ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSpace(left), " ")
		m[name] = append(m[name], strings.TrimSpace(path))
	}
	return m
}

// hostMachines are the ELF machines of the architectures batchkit builds
// for; the loader skips a library of another.
var hostMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "ppc64le": elf.EM_PPC64,
	"riscv64": elf.EM_RISCV, "s390x": elf.EM_S390, "386": elf.EM_386,
}

// hostELF: path is an ELF shared object or executable of this machine's
// class and architecture, as the loader wants.
func hostELF(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if m, ok := hostMachines[runtime.GOARCH]; ok && f.Machine != m {
		return false
	}
	class := elf.ELFCLASS64
	if runtime.GOARCH == "386" {
		class = elf.ELFCLASS32
	}
	return f.Class == class && (f.Type == elf.ET_DYN || f.Type == elf.ET_EXEC)
}

// LoadError is a library the loader cannot load: the NEEDED libraries it
// does not find, or what ldd said.
type LoadError struct {
	Lib     string
	Missing []string // "libccl.so.2"
	Msg     string   // ldd's complaint when it is not a missing library
}

func (e *LoadError) Error() string {
	if len(e.Missing) > 0 {
		return fmt.Sprintf("%s cannot be loaded: it needs %s, not found", e.Lib, strings.Join(e.Missing, ", "))
	}
	return fmt.Sprintf("%s cannot be loaded: %s", e.Lib, e.Msg)
}

// loads asks ldd whether l loads in the environment environ: nil, a
// *LoadError, or another error when ldd could not be run (not found, timed
// out).
func (env *Env) loads(ctx context.Context, l lib, environ []string, path string) error {
	ldd, err := env.LookPath("ldd", path+":/usr/bin:/bin")
	if err != nil {
		return fmt.Errorf("ldd is not on PATH: cannot check that %s loads", l.path)
	}
	out, stderr, err := env.command(ctx, Command{Path: ldd, Args: []string{l.path}, Env: environ})
	if missing := lddMissing(out); len(missing) > 0 {
		return &LoadError{Lib: l.path, Missing: missing}
	}
	var ce *CommandError
	if errors.As(err, &ce) && ce.TimedOut == 0 && !misbehaved(err) {
		msg := lastLine(out + "\n" + stderr)
		if msg == "" {
			msg = err.Error()
		}
		return &LoadError{Lib: l.path, Msg: msg}
	}
	return err
}

// lddMissing are the libraries ldd's output lists as not found:
//
//	libccl.so.2 => not found
func lddMissing(out string) []string {
	var missing []string
	for line := range strings.Lines(out) {
		name, where, ok := strings.Cut(strings.TrimSpace(line), " => ")
		if ok && strings.TrimSpace(where) == "not found" && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
	}
	return missing
}

// dataSections are where a library keeps its version strings: oneCCL's
// in .rodata, Intel MPI's in a struct in .data.
var dataSections = []string{".rodata", ".data", ".data.rel.ro"}

// elfData is the contents of a library's data sections, or its whole
// file when it has none of them.
func elfData(path string) ([]byte, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var data []byte
	for _, name := range dataSections {
		s := f.Section(name)
		if s == nil || s.Type != elf.SHT_PROGBITS {
			continue
		}
		b, err := io.ReadAll(s.Open())
		if err != nil {
			return nil, fmt.Errorf("%s: section %s: %w", path, name, err)
		}
		data = append(data, b...)
		data = append(data, 0)
	}
	if data == nil {
		return os.ReadFile(path)
	}
	return data, nil
}

// IMPIVersion is an Intel MPI release as its library and launcher state
// it: "2021.18.1", "20260626", "b44796a".
type IMPIVersion struct {
	Version, Build, ID string
}

func (v IMPIVersion) String() string {
	s := v.Version
	if v.Build != "" {
		s += " Build " + v.Build
	}
	if v.ID != "" {
		s += " (id: " + v.ID + ")"
	}
	return s
}

// Same: one build of Intel MPI (the id, when both have one, is the build's
// commit).
func (v IMPIVersion) Same(w IMPIVersion) bool {
	if v.ID != "" && w.ID != "" {
		return v.ID == w.ID && v.Version == w.Version
	}
	return v.Version == w.Version && v.Build == w.Build
}

var (
	impiBuildRE   = regexp.MustCompile(`^(\d{8}) \(id: ([0-9a-f]+)\)$`)
	impiVersionRE = regexp.MustCompile(`^20\d\d\.\d+(\.\d+)*$`)
	// What mpiexec --version (and mpirun's) prints first:
	// "Intel(R) MPI Library for Linux* OS, Version 2021.18.1 Build 20260626 (id: b44796a)".
	impiLauncherRE = regexp.MustCompile(`Intel\(R\) MPI Library[^\n]*?Version (\S+) +Build (\d+)(?: +\(id: ([0-9a-f]+)\))?`)
)

// impiLibVersion finds Intel MPI's version in its library's data: the
// string "2021.18.1" and, after zero padding, "20260626 (id: b44796a)",
// the two values its mpiexec prints (the library has no "Version" line of
// its own; MPI_Get_library_version assembles one from them).
func impiLibVersion(data []byte) (IMPIVersion, bool) {
	for off := 0; ; {
		i := bytes.Index(data[off:], []byte(" (id: "))
		if i < 0 {
			return IMPIVersion{}, false
		}
		i += off
		off = i + 1
		build := cstring(data, i)
		m := impiBuildRE.FindStringSubmatch(build.s)
		if m == nil {
			continue
		}
		// The string before it, past its padding.
		j := build.start - 1
		for j >= 0 && data[j] == 0 && build.start-j < 256 {
			j--
		}
		if j < 0 || data[j] == 0 {
			continue
		}
		if v := cstring(data, j); impiVersionRE.MatchString(v.s) {
			return IMPIVersion{Version: v.s, Build: m[1], ID: m[2]}, true
		}
	}
}

// impiLauncherVersion reads mpiexec --version's first line.
func impiLauncherVersion(out string) (IMPIVersion, bool) {
	m := impiLauncherRE.FindStringSubmatch(out)
	if m == nil {
		return IMPIVersion{}, false
	}
	return IMPIVersion{Version: m[1], Build: m[2], ID: m[3]}, true
}

// cclVersionRE is oneCCL's full version, what ccl::get_library_version()
// returns in .full: "Gold-2021.16.1 2025-08-08T 06:35:17Z (HEAD/1ab266d4e)".
var cclVersionRE = regexp.MustCompile(`[A-Z][a-z]+-(20\d\d\.\d+\.\d+) 20\d\d-\d\d-\d\dT[ \d:]+Z \([\x21-\x7e]+\)`)

// cclLibVersion finds oneCCL's full version string in its library's data:
// the version and the whole string.
func cclLibVersion(data []byte) (version, full string, ok bool) {
	m := cclVersionRE.FindSubmatch(data)
	if m == nil {
		return "", "", false
	}
	return string(m[1]), string(m[0]), true
}

// cstr is a NUL-terminated string in a byte slice.
type cstr struct {
	s     string
	start int
}

// cstring is the NUL-delimited string around data[i].
func cstring(data []byte, i int) cstr {
	start := bytes.LastIndexByte(data[:i], 0) + 1
	end := bytes.IndexByte(data[i:], 0)
	if end < 0 {
		end = len(data)
	} else {
		end += i
	}
	return cstr{string(data[start:end]), start}
}

// wheel is the pip package (a .dist-info directory) that installed a
// library into a Python prefix: impi-rt, oneccl-cpu.
type wheel struct {
	name    string // as pip spells it: impi-rt
	version string
	prefix  string // the venv or conda environment
	record  string // its RECORD file
}

// wheelOf is the wheel among dists ("impi_rt") that installed the library
// at path, when path is in PREFIX/lib and PREFIX has the wheel's metadata.
func wheelOf(path string, dists ...string) (wheel, bool) {
	prefix := filepath.Dir(filepath.Dir(path))
	for _, d := range dists {
		matches, _ := filepath.Glob(filepath.Join(prefix, "lib", "python*", "site-packages", d+"-*.dist-info", "RECORD"))
		for _, rec := range matches {
			info := filepath.Base(filepath.Dir(rec))
			version := strings.TrimSuffix(strings.TrimPrefix(info, d+"-"), ".dist-info")
			if recordHas(rec, prefix, path) {
				return wheel{name: strings.ReplaceAll(d, "_", "-"), version: version, prefix: prefix, record: rec}, true
			}
		}
	}
	return wheel{}, false
}

// recordHas: the RECORD lists file (under prefix).
func recordHas(record, prefix, file string) bool {
	files, _ := recordFiles(record, prefix)
	return slices.Contains(files, file)
}

// recordFiles are the files a RECORD lists, as paths (they are relative
// to site-packages: ../../../lib/libmpi.so.12).
func recordFiles(record, prefix string) ([]string, error) {
	f, err := os.Open(record)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	site := filepath.Dir(filepath.Dir(record))
	var files []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, _, _ := strings.Cut(sc.Text(), ",")
		if name == "" || strings.HasPrefix(name, `"`) {
			continue // a name with a comma is quoted: none of the wheels' files
		}
		files = append(files, filepath.Join(site, name))
	}
	return files, sc.Err()
}

// missing are the wheel's files outside site-packages that are gone (a pip
// install that stopped half-way, a file removed by hand or by the
// uninstall of another wheel that listed it too), relative to the prefix.
func (w wheel) missing() []string {
	files, _ := recordFiles(w.record, w.prefix)
	site := filepath.Dir(filepath.Dir(w.record))
	var gone []string
	for _, f := range files {
		if !strings.HasPrefix(rel(site, f), "..") {
			continue // the metadata and Python files: not what a job loads
		}
		if _, err := os.Lstat(f); errors.Is(err, os.ErrNotExist) {
			gone = append(gone, rel(w.prefix, f))
		}
	}
	return gone
}

func (w wheel) String() string { return w.name + " " + w.version }

// reinstall is the pip command that puts the wheel's files back.
func (w wheel) reinstall() string {
	return fmt.Sprintf("%s/bin/pip install --force-reinstall --no-deps %s==%s", w.prefix, w.name, w.version)
}

func rel(base, path string) string {
	r, err := filepath.Rel(base, path)
	if err != nil {
		return path
	}
	return r
}

// listSome is up to three of names and a count of the rest.
func listSome(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:3], ", "), len(names)-3)
}
