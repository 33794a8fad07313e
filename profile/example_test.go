package profile_test

import (
	"fmt"

	"github.com/batchkit/batchkit/profile"
)

// A profile extends another and is merged over it; every value remembers
// the file, line and column it came from (or the built-in default).
func ExampleLoader_Resolve() {
	l := &profile.Loader{Dirs: []string{"testdata/example"}} // NewLoader for batchkit's own search path
	r, err := l.Resolve("gpu")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Profile.Slurm.Partition, r.Profile.MPI.Flavor, r.Profile.Env.Vars["NCCL_DEBUG"])
	for _, s := range r.Settings() {
		fmt.Printf("%-22s = %-32s # %s\n", s.Key, s.Value, s.Origin)
	}
	// Output:
	// gpu openmpi WARN
	// description            = "The GPU partition, for a day"   # testdata/example/gpu.toml:2:1
	// slurm.partition        = "gpu"                            # testdata/example/gpu.toml:6:1
	// slurm.time             = "1-00:00:00"                     # testdata/example/gpu.toml:7:1
	// mpi.flavor             = "openmpi"                        # testdata/example/cluster.toml:9:1
	// mpi.launcher           = "srun"                           # testdata/example/cluster.toml:10:1
	// env.vars.NCCL_DEBUG    = "WARN"                           # testdata/example/gpu.toml:10:1
	// rendezvous.port_policy = "job-id"                         # built-in default
	// rendezvous.port        = 29500                            # built-in default
}

// A file's problems are reported all at once, each at its place.
func ExampleParseFile() {
	src := `[slurm]
partiton = "gpu"
time = "25:00:00:00"

[rendezvous]
port = 80
`
	_, err := profile.ParseFile("site.toml", []byte(src))
	fmt.Println(err)
	// Output:
	// site.toml:2:1: unknown key "slurm.partiton": did you mean "slurm.partition"?
	// site.toml:3:8: slurm.time: invalid time "25:00:00:00": want minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED
	// site.toml:6:8: rendezvous.port: port 80 out of range: want 1024-65535
}
