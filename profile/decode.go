package profile

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/batchkit/batchkit/profile/internal/tomlpos"
)

// File is one profile file, decoded and checked on its own.
type File struct {
	Name    string // the profile's name: the file's base name without .toml
	Path    string // where it was read: a file path, or "embedded:NAME.toml"
	Profile Profile

	keys  map[string]tomlpos.Pos // the leaf keys this file sets → where
	order []string               // those keys in document order
	pos   tomlpos.Positions
}

// Keys returns the keys this file sets, in document order; each variable is
// "env.vars.NAME". extends is not among them.
func (f *File) Keys() []string { return append([]string(nil), f.order...) }

// Has reports whether the file sets key.
func (f *File) Has(key string) bool { _, ok := f.keys[key]; return ok }

// Position returns the line and column where the file sets key.
func (f *File) Position(key string) (line, col int, ok bool) {
	p, ok := f.keys[key]
	return p.Line, p.Col, ok
}

// embeddedPrefix marks the Path of a profile built into batchkit.
const embeddedPrefix = "embedded:"

// ParseFile decodes and checks the profile in src, read from path: its
// syntax, keys, types and values, and the rules between keys set in this
// file. The error, if any, is a *multierror.Error of *Problem, one for each
// problem found, in file order. The File is returned even then, with what
// could be decoded.
func ParseFile(path string, src []byte) (*File, error) {
	name := strings.TrimSuffix(filepath.Base(path), ".toml")
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		dir = filepath.Dir(path)
	}
	f, ps := parse(name, path, dir, src)
	return f, ps.err()
}

// parse decodes src; dir resolves relative paths ("" for an embedded file).
func parse(name, path, dir string, src []byte) (*File, problems) {
	f := &File{Name: name, Path: path, keys: map[string]tomlpos.Pos{}}
	d := &decoder{f: f, bad: map[string]bool{}}

	mirror := reflect.New(mirrorOf(profileType))
	md, err := toml.NewDecoder(bytes.NewReader(src)).Decode(mirror.Interface())
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			d.ps.add(path, parseErrorPos(string(src), pe), "%s", oneLine(pe.Message))
		} else {
			d.ps.add(path, tomlpos.Pos{Line: 1, Col: 1}, "%v", err)
		}
		return f, d.ps
	}
	d.md = md
	f.pos = tomlpos.Scan(string(src))

	// The mirror's keys are matched case-insensitively by the toml package,
	// so each key's own value comes from a second, exact decode, on
	// scratch metadata that leaves md's record of decoded keys alone.
	var top map[string]toml.Primitive
	if d.scratch, err = toml.Decode(string(src), &top); err != nil {
		d.ps.add(path, tomlpos.Pos{Line: 1, Col: 1}, "%s", tomlMessage(err))
		return f, d.ps
	}
	var keys []string
	seen := map[string]bool{}
	for _, k := range md.Keys() { // in document order
		if !seen[k[0]] {
			seen[k[0]] = true
			keys = append(keys, k[0])
		}
	}
	d.table(keys, top, reflect.ValueOf(&f.Profile).Elem(), "")

	// Every key the walk did not take is unknown. The walk reports them
	// itself, with a suggestion and the element of an array; this catches
	// anything it missed.
	for _, k := range md.Undecoded() {
		ks := k.String()
		if !d.covered(ks) {
			d.report(ks, true, "unknown key %q", ks)
		}
	}

	// Check the values that decoded, even if others did not: every problem
	// of the file is reported at once.
	f.resolvePaths(dir)
	d.checkValues()
	d.checkFile()
	return f, d.ps.sorted()
}

type decoder struct {
	f       *File
	md      toml.MetaData // records the keys decoded into the schema
	scratch toml.MetaData // splits tables into their keys' values
	ps      problems
	bad     map[string]bool // keys (without array indices) already reported

	// valueProblems counts the problems that leave a value undecoded (not
	// unknown keys, which leave the rest of their table intact).
	valueProblems int
}

// problem reports a value that could not be decoded at path.
func (d *decoder) problem(path string, atKey bool, format string, a ...any) {
	d.valueProblems++
	d.report(path, atKey, format, a...)
}

func (d *decoder) report(path string, atKey bool, format string, a ...any) {
	d.bad[tomlpos.StripIndices(path)] = true
	d.ps.add(d.f.Path, d.f.pos.Lookup(path, atKey), format, a...)
}

// covered reports whether key, or a table above it, was already reported.
func (d *decoder) covered(key string) bool {
	for k := key; k != ""; k = tomlpos.ParentPath(k) {
		if d.bad[k] {
			return true
		}
	}
	return false
}

func (d *decoder) keyPos(path string) tomlpos.Pos {
	if p, ok := d.f.pos.Key[path]; ok {
		return p
	}
	return tomlpos.Pos{Line: 1 << 30}
}

// sortByPosition orders the keys of a table as they appear in the file.
func (d *decoder) sortByPosition(path string, keys []string) {
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := d.keyPos(tomlpos.JoinPath(path, keys[i])), d.keyPos(tomlpos.JoinPath(path, keys[j]))
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		return keys[i] < keys[j]
	})
}

// table decodes keys of a table into struct rv, one key at a time.
func (d *decoder) table(keys []string, prims map[string]toml.Primitive, rv reflect.Value, path string) {
	for _, k := range keys {
		p := tomlpos.JoinPath(path, k)
		i, ok := fieldIndex(rv.Type(), k)
		if !ok {
			d.unknown(p, k, rv.Type(), path)
			continue
		}
		d.value(prims[k], rv.Field(i), p)
	}
}

// value decodes one key's value into fv, checking its TOML type first so
// that a mismatch is reported in words, at the value. Tables, arrays of
// tables and the map of variables are decoded key by key, element by
// element; the rest by the toml package.
func (d *decoder) value(prim toml.Primitive, fv reflect.Value, path string) {
	raw, ok := d.decodeRaw(prim, fv.Type(), path)
	if !ok {
		return
	}
	switch t := fv.Type(); {
	case t.Kind() == reflect.Struct:
		d.subtable(prim, fv, path)
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		d.tableArray(prim, fv, path)
	case t.Kind() == reflect.Map:
		d.mapEntries(prim, fv, path)
	case t.Kind() == reflect.Slice:
		if d.elementsMatch(rawSlice(raw), t.Elem(), path) {
			d.scalar(prim, fv, path)
		}
	default:
		d.scalar(prim, fv, path)
	}
}

// decodeRaw decodes prim as plain TOML and checks that it suits Go type t.
func (d *decoder) decodeRaw(prim toml.Primitive, t reflect.Type, path string) (any, bool) {
	var raw any
	if err := d.md.PrimitiveDecode(prim, &raw); err != nil {
		d.problem(path, false, "%s", tomlMessage(err))
		return nil, false
	}
	if !typeMatches(t, raw) {
		d.problem(path, false, "%s: want %s, got %s%s", path, describeType(t), describeValue(raw), typeHint(t, raw))
		return nil, false
	}
	return raw, true
}

// subtable decodes a table ([slurm], an env.source element) into struct fv.
func (d *decoder) subtable(prim toml.Primitive, fv reflect.Value, path string) {
	// Decoding into the mirror marks the known keys decoded.
	mirror := reflect.New(mirrorOf(fv.Type()))
	if err := d.md.PrimitiveDecode(prim, mirror.Interface()); err != nil {
		d.problem(path, false, "%s", tomlMessage(err))
		return
	}
	var prims map[string]toml.Primitive
	if err := d.scratch.PrimitiveDecode(prim, &prims); err != nil {
		d.problem(path, false, "%s", tomlMessage(err))
		return
	}
	d.table(d.keysInOrder(path, prims), prims, fv, path)
}

// tableArray decodes an array of tables (env.source) into slice fv, which
// is set only if every element decodes.
func (d *decoder) tableArray(prim toml.Primitive, fv reflect.Value, path string) {
	var elems []toml.Primitive
	if err := d.md.PrimitiveDecode(prim, &elems); err != nil {
		d.problem(path, false, "%s", tomlMessage(err))
		return
	}
	out := reflect.MakeSlice(fv.Type(), len(elems), len(elems))
	before := d.valueProblems
	for i, e := range elems {
		d.value(e, out.Index(i), tomlpos.IndexPath(path, i))
	}
	if d.valueProblems == before {
		fv.Set(out)
		d.set(path)
	}
}

// elementsMatch reports whether every element of a list suits type t,
// reporting each that does not at its index.
func (d *decoder) elementsMatch(elems []any, t reflect.Type, path string) bool {
	ok := true
	for i, e := range elems {
		if !typeMatches(t, e) {
			d.problem(tomlpos.IndexPath(path, i), false, "%s: want %s, got %s", tomlpos.IndexPath(path, i), describeType(t), describeValue(e))
			ok = false
		}
	}
	return ok
}

// mapEntries decodes the table of variables into map fv, each variable a leaf
// of its own: one with a bad value leaves the others set.
func (d *decoder) mapEntries(prim toml.Primitive, fv reflect.Value, path string) {
	var entries map[string]toml.Primitive
	if err := d.md.PrimitiveDecode(prim, &entries); err != nil {
		d.problem(path, false, "%s", tomlMessage(err))
		return
	}
	names := d.keysInOrder(path, entries)
	if fv.IsNil() {
		fv.Set(reflect.MakeMapWithSize(fv.Type(), len(names)))
	}
	for _, name := range names {
		d.mapEntry(entries[name], fv, path, name)
	}
}

// mapEntry decodes variable name of the table at path into map fv.
func (d *decoder) mapEntry(prim toml.Primitive, fv reflect.Value, path, name string) {
	p := tomlpos.JoinPath(path, name)
	et := fv.Type().Elem()
	if _, ok := d.decodeRaw(prim, et, p); !ok {
		return
	}
	ev := reflect.New(et).Elem()
	if err := d.md.PrimitiveDecode(prim, ev.Addr().Interface()); err != nil {
		d.problem(p, false, "%s: %s", p, tomlMessage(err))
		return
	}
	fv.SetMapIndex(reflect.ValueOf(name), ev)
	d.setKey(path+"."+name, p)
}

// scalar decodes a scalar or a list of scalars into fv with the toml
// package. Text types (the flavor, launcher and port policy) reject unknown
// values here.
func (d *decoder) scalar(prim toml.Primitive, fv reflect.Value, path string) {
	if err := d.md.PrimitiveDecode(prim, fv.Addr().Interface()); err != nil {
		d.problem(path, false, "%s: %s", path, tomlMessage(err))
		return
	}
	d.set(path)
}

// keysInOrder lists the keys of a table at path as they appear in the file.
func (d *decoder) keysInOrder(path string, prims map[string]toml.Primitive) []string {
	keys := make([]string, 0, len(prims))
	for k := range prims {
		keys = append(keys, k)
	}
	d.sortByPosition(path, keys)
	return keys
}

// set records that the file sets path, if path is a leaf: not a key inside
// an array element, not extends (which is not merged).
func (d *decoder) set(path string) {
	if !strings.Contains(path, "[") && path != extendsKey {
		d.setKey(path, path)
	}
}

// setKey records that the file sets leaf key, written at path.
func (d *decoder) setKey(key, path string) {
	if _, ok := d.f.keys[key]; !ok {
		d.f.keys[key] = d.f.pos.Lookup(path, true)
		d.f.order = append(d.f.order, key)
	}
}

// unknown reports key k, at path in a table of type t, with the closest
// valid key if there is a plausible one.
func (d *decoder) unknown(path, k string, t reflect.Type, table string) {
	msg := fmt.Sprintf("unknown key %q", path)
	if s := suggest(k, fieldNames(t)); s != "" {
		d.report(path, true, "%s: did you mean %q?", msg, tomlpos.JoinPath(table, s))
		return
	}
	// A variable directly under [env].
	if table == "env" && envNameRE.MatchString(k) && strings.ToUpper(k) == k {
		d.report(path, true, "%s: variables go under [env.vars]: did you mean %q?", msg, tomlpos.JoinPath(VarsKey, k))
		return
	}
	// A key that belongs in another table, e.g. partition at the top level.
	if !strings.Contains(table, "[") {
		var elsewhere []string
		for _, l := range leafSpecs {
			elsewhere = append(elsewhere, l.key)
		}
		for _, key := range elsewhere {
			if last := key[strings.LastIndexByte(key, '.')+1:]; last == k || suggest(k, []string{last}) != "" {
				if tomlpos.ParentPath(key) != table {
					d.report(path, true, "%s: did you mean %q?", msg, key)
					return
				}
			}
		}
	}
	d.report(path, true, "%s", msg)
}

var duplicateRE = regexp.MustCompile(`^Key '(.*)' has already been defined\.$`)

// parseErrorPos is where a syntax error is. The toml package's line
// counts a newline its lexer has read past (an unterminated "[slurm" was
// put on the next line), while its byte offset is right: the position is
// taken from the offset. A duplicate key is reported where the parser
// stopped, which can be past the end of the line; the key being redefined
// is what to point at.
func parseErrorPos(src string, pe toml.ParseError) tomlpos.Pos {
	at, ok := tomlpos.OffsetPos(src, pe.Position.Start)
	if !ok {
		at = tomlpos.Pos{Line: max(pe.Position.Line, 1), Col: max(pe.Position.Col, 1)}
	}
	if m := duplicateRE.FindStringSubmatch(pe.Message); m != nil {
		if p, ok := tomlpos.Scan(src).Redefinition(m[1], at); ok {
			return p
		}
	}
	return at
}

// tomlMessage is the short message of an error from the toml package, without
// its "toml: line N" prefix (our problems carry the position).
func tomlMessage(err error) string {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return oneLine(pe.Message)
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "toml: ")
	if i := strings.Index(msg, "): "); i >= 0 && strings.HasPrefix(msg, "line ") {
		msg = msg[i+3:]
	}
	return oneLine(msg)
}

// oneLine keeps a problem on its line: the toml package quotes the text it
// read raw, newline included ("not a hexadecimal number: '0x\n'").
func oneLine(msg string) string {
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(msg)
}

func rawSlice(raw any) []any {
	switch v := raw.(type) {
	case []any:
		return v
	case []map[string]any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = v[i]
		}
		return out
	}
	return nil
}

// typeMatches reports whether a decoded TOML value suits Go type t.
func typeMatches(t reflect.Type, raw any) bool {
	switch t.Kind() {
	case reflect.String:
		_, ok := raw.(string)
		return ok
	case reflect.Bool:
		_, ok := raw.(bool)
		return ok
	case reflect.Int, reflect.Int64:
		_, ok := raw.(int64)
		return ok
	case reflect.Struct, reflect.Map:
		_, ok := raw.(map[string]any)
		return ok
	case reflect.Slice:
		switch raw.(type) {
		case []any, []map[string]any:
			return true
		}
	}
	return false
}

func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Struct, reflect.Map:
		return "a table"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return "an array of tables"
		}
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(describeType(t.Elem()), "a "), "an ") + "s"
	}
	return t.String()
}

func describeValue(raw any) string {
	switch v := raw.(type) {
	case string:
		return "string " + quoteTOML(v)
	case int64:
		return fmt.Sprintf("integer %d", v)
	case float64:
		return fmt.Sprintf("float %v", v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case time.Time:
		return "datetime " + v.Format(time.RFC3339)
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("%T", raw)
}

// typeHint helps with the common mistakes.
func typeHint(t reflect.Type, raw any) string {
	switch v := raw.(type) {
	case int64, float64, bool:
		if t.Kind() == reflect.String {
			return fmt.Sprintf(" (quote it: \"%v\")", v)
		}
	case string:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String {
			return fmt.Sprintf(" (a list: [%s])", quoteTOML(v))
		}
		if t.Kind() == reflect.Bool && (v == "true" || v == "false") {
			return " (drop the quotes)"
		}
		if t.Kind() == reflect.Int {
			return " (drop the quotes)"
		}
	}
	return ""
}

// resolvePaths makes a relative templates directory relative to the profile.
func (f *File) resolvePaths(dir string) {
	t := f.Profile.Templates
	if t == "" || filepath.IsAbs(t) || dir == "" {
		return
	}
	f.Profile.Templates = filepath.Join(dir, t)
}
