package main

import (
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/buildinfo"
	"github.com/batchkit/batchkit/trainer/collective"
	"github.com/batchkit/batchkit/trainer/collective/ccl"
	"github.com/batchkit/batchkit/trainer/collective/mpi"
)

// commit is set at build time (make build: -X main.commit=$(git rev-parse
// HEAD)); without it the commit comes from the Go toolchain's VCS stamp.
var commit = ""

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
			v := buildinfo.New(version, commit, bi, collective.Built(), ccl.Version())
			if v.MPILibrary != "" {
				v.MPIVersion = mpi.LibraryVersion()
			}
			if asJSON {
				return writeJSONLine(c.App.Writer, v)
			}
			return v.WriteText(c.App.Writer)
		},
	}
}
