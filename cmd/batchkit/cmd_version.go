package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/trainer/collective"
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
	// Backends are the collective backends compiled in: tcp always, mpi
	// with a build tag; MPILibrary names the library mpi links ("" none).
	Backends   []string `json:"backends"`
	MPILibrary string   `json:"mpi_library"`
}

// buildVersion is pure: the link-time values, the toolchain's build
// information (nil when the binary has none) and the MPI library built in.
func buildVersion(version, commit string, bi *debug.BuildInfo, mpiLib string) versionInfo {
	v := versionInfo{Version: version, Commit: commit, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		Backends: []string{"tcp"}, MPILibrary: mpiLib}
	if mpiLib != "" {
		v.Backends = append(v.Backends, "mpi")
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
		if b == "mpi" {
			parts[i] = fmt.Sprintf("mpi (%s)", v.MPILibrary)
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
		Description: `The backends are tcp, always, and mpi with the MPI library it was built against
(make build-mpi MPI=openmpi|mpich). --format json prints one object with the keys version,
commit, go, os, arch, backends and mpi_library. 'batchkit --version' prints the version alone.

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
			v := buildVersion(version, commit, bi, collective.MPIBuilt)
			if asJSON {
				return writeJSONLine(c.App.Writer, v)
			}
			return v.writeText(c.App.Writer)
		},
	}
}
