package gemm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/blas"
)

// Impl multiplies: Sgemm has the signature and the row-major meaning of
// gonum's blas.Float32Level3.Sgemm (which gonum.Implementation satisfies).
// Invalid dimensions panic with an *ArgError, as gonum's do: they are the
// caller's bug, not input.
type Impl interface {
	Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
	// Name is the library's row name: "gonum", "openblas", "mkl".
	Name() string
	// Threads is how many threads a call may use.
	Threads() int
}

// The library names, as --blas takes them.
const (
	Auto     = "auto" // the best one built in: the cgo library, else gonum
	Gonum    = "gonum"
	OpenBLAS = "openblas"
	MKL      = "mkl"
)

// library is one GEMM library as data.
type library struct {
	name string
	// built: compiled into this binary (a build tag).
	built bool
	tag   string // the build tag that brings it in ("" for gonum)
	// open returns the library running threads threads.
	open func(threads int) (Impl, error)
	// version is the loaded library's own version text ("" for gonum).
	version func() string
}

// libraries, best first: Auto takes the first one built in.
var libraries = []library{
	{name: MKL, built: mklBuilt, tag: "mkl", open: openCBLAS(MKL), version: cblasVersion},
	{name: OpenBLAS, built: openblasBuilt, tag: "openblas", open: openCBLAS(OpenBLAS), version: cblasVersion},
	{name: Gonum, built: true, open: openGonum, version: func() string { return "" }},
}

// Names are the values --blas takes.
func Names() []string {
	names := []string{Auto}
	for _, l := range libraries {
		names = append(names, l.name)
	}
	return names
}

// Built lists the libraries compiled in, best first, each with its version
// ("gonum" alone for gonum): what `batchkit version` reports.
func Built() []BuiltLibrary {
	var out []BuiltLibrary
	for _, l := range libraries {
		if l.built {
			out = append(out, BuiltLibrary{Name: l.name, Version: l.version()})
		}
	}
	return out
}

// BuiltLibrary is one library compiled in.
type BuiltLibrary struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Open returns the library named name (Auto: the best built in) running at
// most threads threads a call (Threads gives a rank's count). For openblas
// this sets OpenBLAS's process-wide thread count: one process, one count.
func Open(name string, threads int) (Impl, error) {
	if threads < 1 {
		return nil, fmt.Errorf("gemm: %d threads: want at least 1", threads)
	}
	for _, l := range libraries {
		if name == Auto && l.built || name == l.name {
			if !l.built {
				return nil, &NotBuiltError{Name: l.name, Tag: l.tag}
			}
			return l.open(threads)
		}
	}
	return nil, fmt.Errorf("unknown BLAS %q: want one of %s", name, strings.Join(Names(), ", "))
}

// NotBuiltError: a library this binary was built without.
type NotBuiltError struct{ Name, Tag string }

func (e *NotBuiltError) Error() string {
	return fmt.Sprintf("this batchkit is built without %s (build tag %s: make build-blas BLAS=%s)", e.Name, e.Tag, e.Name)
}

// ErrNotBuilt matches every *NotBuiltError (errors.Is).
var ErrNotBuilt = errors.New("BLAS library not built in")

// Is makes errors.Is(err, ErrNotBuilt) true.
func (e *NotBuiltError) Is(target error) bool { return target == ErrNotBuilt }

// LibraryError: a cgo library that did not do what it was asked (a
// non-zero code from the shim, a thread count it did not take).
type LibraryError struct {
	Name string
	Op   string
	Code int
	Msg  string
}

func (e *LibraryError) Error() string {
	return fmt.Sprintf("%s: %s: %s (code %d)", e.Name, e.Op, e.Msg, e.Code)
}

// Threads is the thread count of a rank's BLAS, by the pinning rules:
// OMP_NUM_THREADS (its first level: "8,2" is 8), what the site or the
// launcher set for the rank, else cpus, the CPUs the rank may run on (the
// caller's runtime.GOMAXPROCS(0): the affinity mask the launcher bound it
// to, a CPU quota, or GOMAXPROCS). from says which, for the run's report.
// An OMP_NUM_THREADS that is not a positive count is an error naming it.
func Threads(getenv func(string) string, cpus int) (n int, from string, err error) {
	v := getenv("OMP_NUM_THREADS")
	if v == "" {
		return max(cpus, 1), FromCPUs, nil
	}
	first, _, _ := strings.Cut(v, ",")
	n, err = strconv.Atoi(strings.TrimSpace(first))
	if err != nil || n < 1 {
		return 0, "", fmt.Errorf("OMP_NUM_THREADS=%q is not a thread count: want a positive integer", v)
	}
	return n, FromOMP, nil
}

// Threads' sources of a count.
const (
	FromOMP  = "OMP_NUM_THREADS"
	FromCPUs = "the rank's CPUs"
)
