package profile

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/batchkit/batchkit/profile/internal/tomlpos"
)

// keyPath is where a value sits in a profile, built a step at a time as
// k8s.io/apimachinery's field.Path is in mpi-operator's validation:
// newKeyPath("mpi").Child("launcher"), .Child("vars").Child("FOO"),
// .Child("source").Index(1).Child("script").
//
// It renders two ways because a variable's name may need quoting in TOML:
// String is the key as messages and Resolved name it (env.vars.MY VAR),
// tomlKey as tomlpos records the positions of the file (env.vars."MY VAR").
type keyPath struct{ steps []pathStep }

type pathStep struct {
	key     string // may be "": a variable's name as a file wrote it
	index   int
	isIndex bool
}

func newKeyPath(keys ...string) keyPath {
	var p keyPath
	for _, k := range keys {
		p = p.Child(k)
	}
	return p
}

// Child is the key name of the table at p.
func (p keyPath) Child(name string) keyPath { return p.add(pathStep{key: name}) }

// Index is element i of the array at p.
func (p keyPath) Index(i int) keyPath { return p.add(pathStep{index: i, isIndex: true}) }

// add copies the steps: paths branch (.Child("script"), .Child("args")) and
// must not share a backing array.
func (p keyPath) add(s pathStep) keyPath {
	steps := make([]pathStep, len(p.steps), len(p.steps)+1)
	copy(steps, p.steps)
	return keyPath{append(steps, s)}
}

// String is the path as messages name it: "env.source[1].script".
func (p keyPath) String() string {
	out := ""
	for i, s := range p.steps {
		switch {
		case s.isIndex:
			out += "[" + strconv.Itoa(s.index) + "]"
		case i == 0:
			out = printable(s.key)
		default:
			out += "." + printable(s.key)
		}
	}
	return out
}

// printable keeps a key on its line: a name with a control character (a
// variable "A\nB" a file quoted) is quoted, other names are left bare.
func printable(key string) string {
	if strings.IndexFunc(key, unicode.IsControl) >= 0 {
		return quoteTOML(key)
	}
	return key
}

// tomlKey is the path as tomlpos records it, each key quoted if it must be.
func (p keyPath) tomlKey() string {
	out := ""
	for _, s := range p.steps {
		if s.isIndex {
			out = tomlpos.IndexPath(out, s.index)
		} else {
			out = tomlpos.JoinPath(out, s.key)
		}
	}
	return out
}

// last is the final key of p: a variable's name under env.vars.
func (p keyPath) last() string {
	if len(p.steps) == 0 {
		return ""
	}
	return p.steps[len(p.steps)-1].key
}
