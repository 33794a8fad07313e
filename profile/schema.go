package profile

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"

	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/profile/internal/tomlpos"
)

// The schema is the Profile type itself: its toml tags name the keys. A leaf
// is a key that is merged as a whole (a scalar or a list); Env.Vars is merged
// entry by entry, so each "env.vars.NAME" is a leaf of its own. What a
// value must be beyond its type is the leaf's row in checks.

type leafSpec struct {
	key   string // "slurm.partition"; "env.vars" for the map of variables
	path  keyPath
	index []int // reflect field index path from Profile
	typ   reflect.Type
	check check // from checks; nil when the type says all
}

var (
	profileType   = reflect.TypeOf(Profile{})
	primitiveType = reflect.TypeOf(toml.Primitive{})
	leafSpecs     = collectLeaves(profileType, keyPath{}, nil)
	varsLeaf, _   = leafByKey(VarsKey)
)

// VarsKey is the table of environment variables; each variable is the key
// VarsKey + "." + NAME.
const VarsKey = "env.vars"

const extendsKey = "extends"

// A check validates one value beyond its TOML type, which decoding has
// already checked; at is where the value is, and what messages name.
type check func(v reflect.Value, at keyPath) []issue

// typeOnly is the check of a key whose type says all there is: a boolean.
var typeOnly check

// checks names the check of every key of the schema, a table per section
// as a site admin writes them ("" is the top level). Adding a key to
// Profile means adding its row here: TestEveryKeyHasACheck fails until it
// has one. The checks themselves are in validate.go; what the key is
// carried to is in consumers.go (TestEveryKeyReachesAConsumer).
var checks = map[string]map[string]check{
	"": {
		"description": value(singleLine),
		"templates":   value(nonEmptyLine),
	},
	"slurm": {
		"partition":    value(noSpace),
		"account":      value(noSpace),
		"qos":          value(noSpace),
		"time":         valid(CheckTime),
		"constraint":   value(nonEmptyLine),
		"requeue":      typeOnly,
		"extra_sbatch": each(sbatchOption),
		"modules":      each(moduleName),
	},
	"mpi": {
		"flavor":            parsed(mpirun.ParseFlavor),
		"launcher":          parsed(mpirun.ParseProgram),
		"binary":            value(nonEmptyLine),
		"args":              each(nonEmptyLine),
		"bootstrap":         value(anyBootstrap),
		"srun_mpi":          value(srunPlugin),
		"allow_run_as_root": typeOnly,
		"oversubscribe":     typeOnly,
	},
	"env": {
		"source":          each(sourceScript),
		"oneccl_bindings": typeOnly,
		"python":          value(nonEmptyLine),
		"intel_wheels":    value(wheelsPrefix),
		"vars":            value(variable), // each variable's value, at env.vars.NAME
	},
	"rendezvous": {
		"port_policy": parsed(ParsePortPolicy),
		"port":        value(portRange),
	},
}

// checkOf is the check of the leaf at path: its row in checks.
func checkOf(path keyPath) check {
	section := ""
	if len(path.steps) > 1 {
		section = path.steps[0].key
	}
	return checks[section][path.last()]
}

func collectLeaves(t reflect.Type, prefix keyPath, index []int) []leafSpec {
	var out []leafSpec
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		path := prefix.Child(tomlName(f))
		idx := append(append([]int(nil), index...), i)
		if f.Type.Kind() == reflect.Struct {
			out = append(out, collectLeaves(f.Type, path, idx)...)
			continue
		}
		key := path.tomlKey()
		if key == extendsKey {
			continue // not merged
		}
		out = append(out, leafSpec{key: key, path: path, index: idx, typ: f.Type, check: checkOf(path)})
	}
	return out
}

func leafByKey(key string) (leafSpec, bool) {
	for _, l := range leafSpecs {
		if l.key == key {
			return l, true
		}
	}
	return leafSpec{}, false
}

func tomlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

// fieldIndex finds the field of struct type t whose key is exactly name.
func fieldIndex(t reflect.Type, name string) (int, bool) {
	for i := 0; i < t.NumField(); i++ {
		if tomlName(t.Field(i)) == name {
			return i, true
		}
	}
	return 0, false
}

func fieldNames(t reflect.Type) []string {
	names := make([]string, t.NumField())
	for i := range names {
		names[i] = tomlName(t.Field(i))
	}
	return names
}

// Keys lists every key a profile may set, in documentation order, with
// "env.vars.NAME" standing for the variables.
func Keys() []string {
	out := []string{extendsKey}
	for _, l := range leafSpecs {
		if l.key == VarsKey {
			out = append(out, VarsKey+".NAME")
			continue
		}
		out = append(out, l.key)
	}
	return out
}

// mergeKeys are the leaf keys Resolved.Set accepts, for suggestions.
func mergeKeys() []string {
	var out []string
	for _, l := range leafSpecs {
		out = append(out, l.key)
	}
	return out
}

// lookupLeaf finds the leaf for key; for "env.vars.NAME" it returns the map
// leaf and NAME.
func lookupLeaf(key string) (leafSpec, string, bool) {
	if name, ok := strings.CutPrefix(key, VarsKey+"."); ok && name != "" {
		return varsLeaf, name, true
	}
	if key == VarsKey {
		return leafSpec{}, "", false
	}
	l, ok := leafByKey(key)
	return l, "", ok
}

// leafAt finds the leaf of key and the path of its value. Unlike lookupLeaf
// it takes "env.vars.": a file may set a variable with an empty name, which
// validation must report.
func leafAt(key string) (leafSpec, keyPath, bool) {
	if name, ok := strings.CutPrefix(key, VarsKey+"."); ok {
		return varsLeaf, varsLeaf.path.Child(name), true
	}
	l, _, ok := lookupLeaf(key)
	return l, l.path, ok
}

// get returns the value of a leaf key in p, and whether it is present (for
// a variable: whether it is in the map).
func get(p *Profile, key string) (reflect.Value, bool) {
	l, name, ok := lookupLeaf(key)
	if !ok {
		return reflect.Value{}, false
	}
	fv := reflect.ValueOf(p).Elem().FieldByIndex(l.index)
	if name != "" {
		v := fv.MapIndex(reflect.ValueOf(name))
		return v, v.IsValid()
	}
	return fv, true
}

// copyLeaf copies key's value from src to dst.
func copyLeaf(dst, src *Profile, key string) {
	v, ok := get(src, key)
	if !ok {
		return
	}
	setLeaf(dst, key, v)
}

func setLeaf(p *Profile, key string, v reflect.Value) {
	l, name, _ := lookupLeaf(key)
	fv := reflect.ValueOf(p).Elem().FieldByIndex(l.index)
	if name != "" {
		if fv.IsNil() {
			fv.Set(reflect.MakeMap(fv.Type()))
		}
		fv.SetMapIndex(reflect.ValueOf(name), v)
		return
	}
	fv.Set(cloneValue(v))
}

// clearLeaf resets key to its zero value.
func clearLeaf(p *Profile, key string) {
	l, name, _ := lookupLeaf(key)
	fv := reflect.ValueOf(p).Elem().FieldByIndex(l.index)
	if name != "" {
		if !fv.IsNil() {
			fv.SetMapIndex(reflect.ValueOf(name), reflect.Value{})
		}
		return
	}
	fv.Set(reflect.Zero(fv.Type()))
}

// cloneValue copies slices so that merged profiles share no backing arrays
// with their layers.
func cloneValue(v reflect.Value) reflect.Value {
	if v.Kind() != reflect.Slice || v.IsNil() {
		return v
	}
	c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
	for i := 0; i < v.Len(); i++ {
		c.Index(i).Set(cloneValue(v.Index(i)))
	}
	if v.Type().Elem().Kind() == reflect.Struct {
		for i := 0; i < v.Len(); i++ {
			for j := 0; j < v.Index(i).NumField(); j++ {
				c.Index(i).Field(j).Set(cloneValue(v.Index(i).Field(j)))
			}
		}
	}
	return c
}

func sortedVarNames(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// mirrorOf returns a struct type with t's toml keys and every field a
// toml.Primitive. Decoding a table into it marks the schema's keys as
// decoded, and nothing else, so MetaData.Undecoded lists the unknown keys,
// while the values themselves are decoded one key at a time (each key's
// problems reported on their own).
func mirrorOf(t reflect.Type) reflect.Type {
	if m, ok := mirrors.Load(t); ok {
		return m.(reflect.Type)
	}
	fields := make([]reflect.StructField, t.NumField())
	for i := range fields {
		f := t.Field(i)
		fields[i] = reflect.StructField{
			Name: f.Name,
			Type: primitiveType,
			Tag:  reflect.StructTag(fmt.Sprintf(`toml:%q`, tomlName(f))),
		}
	}
	m := reflect.StructOf(fields)
	mirrors.Store(t, m)
	return m
}

var mirrors sync.Map

// formatValue writes v as a TOML value.
func formatValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return quoteTOML(v.String())
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = formatValue(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Struct: // an inline table: Script
		var parts []string
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if f.IsZero() {
				continue
			}
			parts = append(parts, tomlpos.Seg(tomlName(v.Type().Field(i)))+" = "+formatValue(f))
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	return fmt.Sprint(v.Interface())
}

// quoteTOML writes s as a TOML basic string.
func quoteTOML(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
