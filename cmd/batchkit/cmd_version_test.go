package main

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuildVersion(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.99", Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}}
	dirty := &debug.BuildInfo{GoVersion: "go1.99", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}
	unstamped := &debug.BuildInfo{GoVersion: "go1.99"}
	base := func(v versionInfo) versionInfo {
		v.OS, v.Arch = runtime.GOOS, runtime.GOARCH
		return v
	}
	tests := []struct {
		name    string
		version string
		commit  string
		bi      *debug.BuildInfo
		mpiLib  string
		want    versionInfo
	}{
		{"tcp only, commit from the link", "v1.0", "fff", stamped, "",
			base(versionInfo{Version: "v1.0", Commit: "fff", Go: "go1.99", Backends: []string{"tcp"}})},
		{"commit from the VCS stamp", "dev", "", stamped, "",
			base(versionInfo{Version: "dev", Commit: "abc123", Go: "go1.99", Backends: []string{"tcp"}})},
		{"modified tree", "dev", "", dirty, "",
			base(versionInfo{Version: "dev", Commit: "abc123-dirty", Go: "go1.99", Backends: []string{"tcp"}})},
		{"no VCS stamp", "dev", "", unstamped, "",
			base(versionInfo{Version: "dev", Commit: "unknown", Go: "go1.99", Backends: []string{"tcp"}})},
		{"no build info", "dev", "", nil, "",
			base(versionInfo{Version: "dev", Commit: "unknown", Go: runtime.Version(), Backends: []string{"tcp"}})},
		{"Open MPI", "v1.0", "fff", stamped, "openmpi",
			base(versionInfo{Version: "v1.0", Commit: "fff", Go: "go1.99", Backends: []string{"tcp", "mpi"}, MPILibrary: "openmpi"})},
		{"MPICH", "v1.0", "fff", stamped, "mpich",
			base(versionInfo{Version: "v1.0", Commit: "fff", Go: "go1.99", Backends: []string{"tcp", "mpi"}, MPILibrary: "mpich"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := buildVersion(tt.version, tt.commit, tt.bi, tt.mpiLib)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestVersionBackendsText(t *testing.T) {
	tests := []struct {
		name string
		v    versionInfo
		want string
	}{
		{"tcp", versionInfo{Backends: []string{"tcp"}}, "tcp"},
		{"mpi", versionInfo{Backends: []string{"tcp", "mpi"}, MPILibrary: "mpich"}, "tcp, mpi (mpich)"},
	}
	for _, tt := range tests {
		if got := tt.v.backendsText(); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
