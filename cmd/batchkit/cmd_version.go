package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/trainer/collective"
	"github.com/batchkit/batchkit/trainer/collective/ccl"
	"github.com/batchkit/batchkit/trainer/collective/mpi"
)

// commit is set at build time (make build: -X main.commit=$(git rev-parse
// HEAD)); without it the commit comes from the Go toolchain's VCS stamp.
var commit = ""

// versionInfo is what 'batchkit version' reports; its JSON keys are the
// interface for scripts.
type versionInfo struct {
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

// buildVersion is pure: the link-time values, the toolchain's build
// information (nil when the binary has none), the backends built in
// (collective.Built) and the oneCCL version ("" without ccl).
func buildVersion(version, commit string, bi *debug.BuildInfo, built []collective.BuiltBackend, cclVersion string) versionInfo {
	v := versionInfo{Version: version, Commit: commit, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
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

func (v versionInfo) backendsText() string {
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

func (v versionInfo) writeText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "batchkit %s\ncommit:   %s\ngo:       %s %s/%s\nbackends: %s\n",
		v.Version, v.Commit, v.Go, v.OS, v.Arch, v.backendsText())
	return err
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, commit, Go version and the collective backends compiled in",
		Description: `The backends are tcp, always, mpi with the MPI library it was built against
(make build-mpi MPI=openmpi|mpich) and ccl with the oneCCL it runs on (make build-ccl).
--format json prints one object with the keys version, commit, go, os, arch, backends,
mpi_library, (with mpi) mpi_version, the loaded library's MPI_Get_library_version, and (with ccl)
ccl_version. 'batchkit --version' prints the version alone.

Examples:
   batchkit version
   batchkit version --format json | jq -r .mpi_library`,
		Flags: []cli.Flag{formatFlag()},
		Action: func(c *cli.Context) error {
			asJSON, err := jsonNoArgs(c)
			if err != nil {
				return err
			}
			bi, _ := debug.ReadBuildInfo()
			v := buildVersion(version, commit, bi, collective.Built(), ccl.Version())
			if v.MPILibrary != "" {
				v.MPIVersion = mpi.LibraryVersion()
			}
			if asJSON {
				return writeJSONLine(c.App.Writer, v)
			}
			return v.writeText(c.App.Writer)
		},
	}
}
