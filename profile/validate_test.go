package profile

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/profile/internal/tomlpos"
)

// Every key of the schema has a row in checks, and every row names a key: a
// key added to Profile without one, or a row left behind by a renamed key,
// fails here. Each check also runs once on a value of its key's type (a list
// with one element), which catches a row whose check takes another type.
func TestEveryKeyHasACheck(t *testing.T) {
	rows := map[string]bool{}
	for section, keys := range checks {
		for name := range keys {
			rows[tomlpos.JoinPath(section, name)] = true
		}
	}
	for _, l := range leafSpecs {
		section, name := "", l.path.last()
		if len(l.path.steps) > 1 {
			section = l.path.steps[0].key
		}
		if _, ok := checks[section][name]; !ok {
			t.Errorf("%s has no row in checks (typeOnly if its type says all)", l.key)
		}
		delete(rows, l.key)
		if l.check == nil {
			continue
		}
		v := reflect.New(l.typ).Elem()
		switch l.typ.Kind() {
		case reflect.Slice:
			v = reflect.MakeSlice(l.typ, 1, 1)
		case reflect.Map:
			v = reflect.Zero(l.typ.Elem())
		}
		l.check(v, l.path.Child("X")) // must not panic
	}
	for key := range rows {
		t.Errorf("checks has a row for %s, which is not a key of the schema", key)
	}
}

func TestKeyPath(t *testing.T) {
	tests := []struct {
		name         string
		path         keyPath
		str, tomlKey string
	}{
		{"top level", newKeyPath("templates"), "templates", "templates"},
		{"section", newKeyPath("mpi", "launcher"), "mpi.launcher", "mpi.launcher"},
		{"variable", newKeyPath("env", "vars", "FOO"), "env.vars.FOO", "env.vars.FOO"},
		{"variable to quote", newKeyPath("env", "vars", "a b"), "env.vars.a b", `env.vars."a b"`},
		{"empty variable name", newKeyPath("env", "vars", ""), "env.vars.", `env.vars.""`},
		// A message stays on one line.
		{"variable with a line break", newKeyPath("env", "vars", "a\nb"), `env.vars."a\nb"`, `env.vars."a\nb"`},
		{"array element", newKeyPath("env", "source").Index(1).Child("args").Index(0), "env.source[1].args[0]", "env.source[1].args[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []string{tt.path.String(), tt.path.tomlKey()}
			if diff := cmp.Diff([]string{tt.str, tt.tomlKey}, got); diff != "" {
				t.Errorf("String, tomlKey (-want +got):\n%s", diff)
			}
		})
	}
}

// Branches of one path do not share steps.
func TestKeyPathBranches(t *testing.T) {
	el := newKeyPath("env", "source").Index(0)
	script, args := el.Child("script"), el.Child("args")
	if script.String() != "env.source[0].script" || args.String() != "env.source[0].args" {
		t.Errorf("branches: %s, %s", script, args)
	}
}

// checkLeaf puts each problem at the part of the value it is about.
func TestCheckLeaf(t *testing.T) {
	tests := []struct {
		name string
		p    Profile
		key  string
		want []string
	}{
		{"valid", Profile{Slurm: Slurm{Partition: "gpu"}}, "slurm.partition", nil},
		{"type only", Profile{}, "slurm.requeue", nil},
		{"unknown key", Profile{}, "slurm.nope", nil},
		{"whole value", Profile{Slurm: Slurm{Partition: "a b"}}, "slurm.partition", []string{`slurm.partition: "a b" contains white space`}},
		{"list element", Profile{Slurm: Slurm{Modules: []string{"ok", ""}}}, "slurm.modules", []string{"slurm.modules[1]: empty module name"}},
		{
			"table in a list",
			Profile{Env: Env{Source: []Script{{Script: "rel", Args: []string{"a\nb"}}}}},
			"env.source",
			[]string{`env.source[0].script: "rel": want an absolute path`, `env.source[0].args[0]: "a\nb" spans lines`},
		},
		{"variable name", Profile{Env: Env{Vars: map[string]string{"1X": ""}}}, "env.vars.1X", []string{`env.vars.1X: "1X" is not a valid environment variable name: want letters, digits and _, not starting with a digit`}},
		{"empty variable name", Profile{Env: Env{Vars: map[string]string{"": ""}}}, "env.vars.", []string{`env.vars.: "" is not a valid environment variable name: want letters, digits and _, not starting with a digit`}},
		{"variable value", Profile{Env: Env{Vars: map[string]string{"FOO": "a\x00"}}}, "env.vars.FOO", []string{`env.vars.FOO: "a\u0000" contains a NUL byte, which no program can receive`}},
		{"port", Profile{Rendezvous: Rendezvous{Port: 80}}, "rendezvous.port", []string{"rendezvous.port: port 80 out of range: want 1024-65535"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, is := range checkLeaf(&tt.p, tt.key) {
				got = append(got, is.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("checkLeaf(%s) (-want +got):\n%s", tt.key, diff)
			}
		})
	}
}
