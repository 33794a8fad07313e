package profile_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/batchkit/batchkit/launch/sbatch"
	"github.com/batchkit/batchkit/profile"
	"github.com/batchkit/batchkit/slurm"
)

// readElsewhere are the keys of the schema that no consumer input built in
// consumers.go carries, and who reads them instead. Adding a key here needs
// a reason; a key that is read nowhere belongs nowhere.
var readElsewhere = map[string]string{
	"description": "batchkit profile list shows it (profile/report)",
	"templates":   "batchkit sbatch loads the batch script's templates from it (templates.Load in cmd/batchkit/cmd_sbatch.go), as does profile show",
}

// candidates are values tried for each key, in order: the first one Set
// accepts that changes the baseline profile is the key's distinctive value.
// A new key whose checks reject all of them needs one added here.
var candidates = []string{
	"true", "mpich", "mpiexec", "rsh", "pmix", "job-id", "1:00:00", "29501",
	"/zq/vars.sh", "--hint=nomultithread", "zq",
}

// baseline is a profile every consumer builds from without error, with
// the keys that only matter under another one's value set so that they
// do (rendezvous.port under port_policy fixed).
func baseline(t *testing.T) *profile.Resolved {
	t.Helper()
	r := profile.Merge()
	for k, v := range map[string]string{
		"mpi.flavor": "openmpi", "mpi.launcher": "mpirun",
		"rendezvous.port_policy": "fixed", "rendezvous.port": "29500",
	} {
		if err := r.Set(k, v, "test"); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// inputs are what each consumer is given from r, by consumer; a consumer
// whose input cannot be built (the key's value makes no launch of the
// baseline: srun_mpi without srun) is left out.
func inputs(r *profile.Resolved) map[string]any {
	p := r.Profile
	out := map[string]any{
		"mpirun defaults": p.MPIDefaults(),
		"envsetup":        []any{p.Env.Scripts(), p.Env.OneCCLBindings, p.Env.Python, p.Env.IntelWheels, p.Env.Vars},
	}
	for name, torchrun := range map[string]int{"batch plan": 0, "batch plan (torchrun)": 2} {
		job := slurm.JobOptions{NTasks: 2}
		if torchrun > 0 {
			job = slurm.JobOptions{Nodes: "2"}
		}
		s, err := sbatch.Script(sbatch.Request{ProfileName: "p", Profile: p, Job: job, Program: []string{"prog"}, Batchkit: "/bk", Torchrun: torchrun})
		if err == nil {
			out[name] = s
		}
	}
	return out
}

// TestEveryKeyReachesAConsumer sets every key of the schema to a value of
// its own and fails for a key that changes no consumer's input: one added
// to Profile (and schema's checks) but carried to nothing.
func TestEveryKeyReachesAConsumer(t *testing.T) {
	base := inputs(baseline(t))
	for _, key := range profile.Keys() {
		if key == "extends" {
			continue // not merged: it names the layers
		}
		if strings.HasSuffix(key, ".NAME") {
			key = strings.TrimSuffix(key, "NAME") + "ZQ_VAR"
		}
		t.Run(key, func(t *testing.T) {
			r, value := withKey(t, key)
			var reached []string
			for name, in := range inputs(r) {
				if b, ok := base[name]; ok && !reflect.DeepEqual(b, in) {
					reached = append(reached, name)
				}
			}
			why, allowed := readElsewhere[key]
			switch {
			case len(reached) == 0 && !allowed:
				t.Errorf("%s = %s reaches no consumer: carry it in profile/consumers.go (or say who reads it in readElsewhere)", key, value)
			case len(reached) > 0 && allowed:
				t.Errorf("%s reaches %s, but readElsewhere says %q: drop it there", key, strings.Join(reached, ", "), why)
			}
		})
	}
}

// withKey is the baseline with key set to the first candidate that
// changes it.
func withKey(t *testing.T, key string) (*profile.Resolved, string) {
	t.Helper()
	before := baseline(t).Profile
	for _, v := range candidates {
		r := baseline(t)
		if err := r.Set(key, v, "test"); err != nil {
			continue
		}
		if !reflect.DeepEqual(before, r.Profile) {
			return r, v
		}
	}
	t.Fatalf("no candidate value for %s: add one to candidates", key)
	return nil, ""
}

// TestMPIDefaultsCarryEveryMPIKey checks the one copy of the [mpi] table
// into mpirun's types: every field of profile.MPI has a field of the same
// name in mpirun.Defaults with its value, and mpirun.Defaults.Spec carries
// each to the launch (the one rename: Args is Spec.ExtraArgs).
func TestMPIDefaultsCarryEveryMPIKey(t *testing.T) {
	m := profile.MPI{Flavor: "mpich", Launcher: "srun", Binary: "b", Args: []string{"a"}, Bootstrap: "ssh",
		SrunMPI: "pmi2", AllowRunAsRoot: true, Oversubscribe: true}
	mv := reflect.ValueOf(m)
	for i := 0; i < mv.NumField(); i++ {
		if mv.Field(i).IsZero() {
			t.Fatalf("set %s in this test", mv.Type().Field(i).Name)
		}
	}
	d := m.Defaults()
	dv, sv := reflect.ValueOf(d), reflect.ValueOf(d.Spec())
	for i := 0; i < mv.NumField(); i++ {
		name := mv.Type().Field(i).Name
		want := fmt.Sprint(mv.Field(i).Interface())
		if f := dv.FieldByName(name); !f.IsValid() || fmt.Sprint(f.Interface()) != want {
			t.Errorf("mpirun.Defaults.%s does not carry mpi's %s", name, name)
		}
		specName := name
		if name == "Args" {
			specName = "ExtraArgs"
		}
		if f := sv.FieldByName(specName); !f.IsValid() || fmt.Sprint(f.Interface()) != want {
			t.Errorf("mpirun.Defaults.Spec().%s does not carry mpi's %s", specName, name)
		}
	}
}
