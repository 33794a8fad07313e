// Package buildinfo is what a batchkit binary is: its version and commit,
// the Go toolchain, and the collective backends compiled in ('batchkit
// version').
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/batchkit/batchkit/trainer/collective"
)

// Info is what 'batchkit version' reports; its JSON keys are the
// interface for scripts.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	// Backends are the collective backends compiled in (collective's
	// table: tcp always, mpi and ccl with build tags); MPILibrary names the
	// library mpi links ("" none), CCLVersion the oneCCL ccl runs on.
	Backends   []string `json:"backends"`
	MPILibrary string   `json:"mpi_library"`
	// MPIVersion is the loaded library's own MPI_Get_library_version,
	// first line: Intel MPI under the mpich ABI build, say.
	MPIVersion string `json:"mpi_version,omitempty"`
	CCLVersion string `json:"ccl_version,omitempty"`
}

// New is pure: the version and commit set at link time (-X main.version,
// main.commit; "" commit: the toolchain's VCS stamp), the toolchain's
// build information (nil when the binary has none), the backends built in
// (collective.Built) and the oneCCL version ("" without ccl).
func New(version, commit string, bi *debug.BuildInfo, built []collective.BuiltBackend, cclVersion string) Info {
	v := Info{Version: version, Commit: commit, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	// tcp first, as before the table: scripts read backends[0].
	v.Backends = append(v.Backends, string(collective.TCP))
	for _, b := range built {
		if b.Name != string(collective.TCP) {
			v.Backends = append(v.Backends, b.Name)
		}
		switch b.Name {
		case string(collective.MPI):
			v.MPILibrary = b.Library
		case string(collective.CCL):
			v.CCLVersion = cclVersion
		}
	}
	if bi != nil {
		v.Go = bi.GoVersion
	}
	if v.Commit == "" {
		v.Commit = vcsCommit(bi)
	}
	return v
}

// vcsCommit is the revision 'go build' stamped into the binary, with
// "-dirty" for a modified tree; "unknown" when it did not (go run, tests,
// -buildvcs=false).
func vcsCommit(bi *debug.BuildInfo) string {
	if bi == nil {
		return "unknown"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "unknown"
	}
	return rev + dirty
}

// BackendsText names the backends, with the MPI library and the oneCCL
// version of those that have one.
func (v Info) BackendsText() string {
	parts := make([]string, len(v.Backends))
	for i, b := range v.Backends {
		parts[i] = b
		switch b {
		case string(collective.MPI):
			parts[i] = fmt.Sprintf("mpi (%s)", v.MPILibrary)
			if v.MPIVersion != "" {
				parts[i] = fmt.Sprintf("mpi (%s: %s)", v.MPILibrary, v.MPIVersion)
			}
		case string(collective.CCL):
			parts[i] = fmt.Sprintf("ccl (oneCCL %s)", v.CCLVersion)
		}
	}
	return strings.Join(parts, ", ")
}

// WriteText writes v for people, one fact a line.
func (v Info) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "batchkit %s\ncommit:   %s\ngo:       %s %s/%s\nbackends: %s\n",
		v.Version, v.Commit, v.Go, v.OS, v.Arch, v.BackendsText())
	return err
}
