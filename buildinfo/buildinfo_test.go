package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/trainer/collective"
)

var tcpOnly = []collective.BuiltBackend{{Name: "tcp", Library: "go"}}

func withMPI(lib string) []collective.BuiltBackend {
	return []collective.BuiltBackend{{Name: "mpi", Library: lib}, {Name: "tcp", Library: "go"}}
}

func TestBuildVersion(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.99", Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}}
	dirty := &debug.BuildInfo{GoVersion: "go1.99", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}
	unstamped := &debug.BuildInfo{GoVersion: "go1.99"}
	base := func(v Info) Info {
		v.OS, v.Arch = runtime.GOOS, runtime.GOARCH
		return v
	}
	tests := []struct {
		name    string
		version string
		commit  string
		bi      *debug.BuildInfo
		built   []collective.BuiltBackend
		want    Info
	}{
		{"tcp only, commit from the link", "v1.0", "fff", stamped, tcpOnly,
			base(Info{Version: "v1.0", Commit: "fff", Go: "go1.99", Backends: []string{"tcp"}})},
		{"commit from the VCS stamp", "dev", "", stamped, tcpOnly,
			base(Info{Version: "dev", Commit: "abc123", Go: "go1.99", Backends: []string{"tcp"}})},
		{"modified tree", "dev", "", dirty, tcpOnly,
			base(Info{Version: "dev", Commit: "abc123-dirty", Go: "go1.99", Backends: []string{"tcp"}})},
		{"no VCS stamp", "dev", "", unstamped, tcpOnly,
			base(Info{Version: "dev", Commit: "unknown", Go: "go1.99", Backends: []string{"tcp"}})},
		{"no build info", "dev", "", nil, tcpOnly,
			base(Info{Version: "dev", Commit: "unknown", Go: runtime.Version(), Backends: []string{"tcp"}})},
		{"Open MPI", "v1.0", "fff", stamped, withMPI("openmpi"),
			base(Info{Version: "v1.0", Commit: "fff", Go: "go1.99", Backends: []string{"tcp", "mpi"}, MPILibrary: "openmpi"})},
		{"MPICH", "v1.0", "fff", stamped, withMPI("mpich"),
			base(Info{Version: "v1.0", Commit: "fff", Go: "go1.99", Backends: []string{"tcp", "mpi"}, MPILibrary: "mpich"})},
		{"oneCCL: the table's order, tcp first", "v1.0", "fff", stamped,
			[]collective.BuiltBackend{{Name: "ccl", Library: "oneccl"}, {Name: "tcp", Library: "go"}},
			base(Info{Version: "v1.0", Commit: "fff", Go: "go1.99", Backends: []string{"tcp", "ccl"}, CCLVersion: "2021.16.1"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := New(tt.version, tt.commit, tt.bi, tt.built, "2021.16.1")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestVersionBackendsText(t *testing.T) {
	tests := []struct {
		name string
		v    Info
		want string
	}{
		{"tcp", Info{Backends: []string{"tcp"}}, "tcp"},
		{"mpi", Info{Backends: []string{"tcp", "mpi"}, MPILibrary: "mpich"}, "tcp, mpi (mpich)"},
		{"ccl", Info{Backends: []string{"tcp", "ccl"}, CCLVersion: "2021.16.1"}, "tcp, ccl (oneCCL 2021.16.1)"},
	}
	for _, tt := range tests {
		if got := tt.v.BackendsText(); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
