package profile

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/batchkit/batchkit/internal/closed"

	"github.com/batchkit/batchkit/mpirun"
	"github.com/batchkit/batchkit/profile/internal/tomlpos"
)

// Sources of values that do not come from a profile file.
const (
	// BuiltIn is the Origin.Source of batchkit's own defaults.
	BuiltIn = "built-in default"
	// CommandLine is the source to pass to Resolved.Set for flags.
	CommandLine = "command line"
)

// defaults are the built-in values under every profile (documented in
// site-configs/README.md).
var defaults = Profile{
	MPI:        MPI{Launcher: mpirun.ProgramMpirun},
	Rendezvous: Rendezvous{PortPolicy: PortFromJobID, Port: 29500},
}

var defaultKeys = []string{"mpi.launcher", "rendezvous.port_policy", "rendezvous.port"}

// Origin is where a merged value came from.
type Origin struct {
	Source    string // a file path, "embedded:NAME.toml", BuiltIn, or the source given to Set
	Line, Col int    // where in the file; 0 when not from a file
	Layer     int    // 0 built-in, then 1, 2, ... from the base profile up, then Set's
}

func (o Origin) String() string {
	if o.Line > 0 {
		return fmt.Sprintf("%s:%d:%d", o.Source, o.Line, o.Col)
	}
	return o.Source
}

// Resolved is a profile merged from its layers: built-in defaults, the
// profiles it extends (base first), the profile itself, then whatever Set
// puts on top. Every value keeps its Origin.
type Resolved struct {
	Name    string  // the profile's name
	Path    string  // where it was read
	Chain   []*File // the profile, then the one it extends, and so on
	Profile Profile // the merged values; Extends is empty

	origins map[string]Origin
	top     int // the layer of Set
}

// Merge layers files over the built-in defaults: chain[0] on top, the
// profile it extends below it, and so on. Resolve does this after finding
// the chain; Merge does not validate (call Validate).
func Merge(chain ...*File) *Resolved {
	r := &Resolved{origins: map[string]Origin{}}
	if len(chain) > 0 {
		r.Name, r.Path = chain[0].Name, chain[0].Path
	}
	r.Chain = chain
	r.apply(defaultKeys, &defaults, func(string) Origin { return Origin{Source: BuiltIn} })
	for i := len(chain) - 1; i >= 0; i-- {
		f := chain[i]
		r.top++
		r.apply(f.order, &f.Profile, func(key string) Origin {
			p := f.keys[key]
			return Origin{Source: f.Path, Line: p.Line, Col: p.Col}
		})
	}
	r.top++
	return r
}

// Keys that belong to the launcher and flavor they were written for: a
// layer that changes mpi.launcher or mpi.flavor without setting them drops
// the values from the layers below. (A bootstrap is Hydra's -bootstrap or
// Open MPI's plm, and srun takes none; srun plugins suit some flavors.)
// srun_mpi is bound to srun alone: a switch to srun keeps it, since it can
// only have been meant for srun.
var (
	launcherBound = []string{"mpi.binary", "mpi.args", "mpi.bootstrap"}
	srunBound     = []string{"mpi.srun_mpi"}
	flavorBound   = []string{"mpi.binary", "mpi.args", "mpi.bootstrap", "mpi.srun_mpi"}
)

// apply puts keys of src on top as layer r.top.
func (r *Resolved) apply(keys []string, src *Profile, origin func(string) Origin) {
	cur := &r.Profile
	var drop []string
	if slices.Contains(keys, "mpi.launcher") && src.MPI.Launcher != cur.MPI.Launcher {
		drop = append(drop, launcherBound...)
		if src.MPI.Launcher != mpirun.ProgramSrun {
			drop = append(drop, srunBound...)
		}
	}
	if slices.Contains(keys, "mpi.flavor") && cur.MPI.Flavor != "" && src.MPI.Flavor != cur.MPI.Flavor {
		drop = append(drop, flavorBound...)
	}
	for _, key := range drop {
		if o, ok := r.origins[key]; ok && o.Layer < r.top && !slices.Contains(keys, key) {
			clearLeaf(cur, key)
			delete(r.origins, key)
		}
	}
	for _, key := range keys {
		copyLeaf(cur, src, key)
		o := origin(key)
		o.Layer = r.top
		r.origins[key] = o
	}
}

// Origin returns where key's value came from; variables are "env.vars.NAME".
func (r *Resolved) Origin(key string) (Origin, bool) {
	o, ok := r.origins[key]
	return o, ok
}

// Set puts value for key on top of every profile layer, as flags do;
// source is what Origin and errors name, normally CommandLine. value is a
// string (parsed for the key's type: "true", "8080", lists comma-separated,
// env.source entries as "SCRIPT ARG..."; a list starting with "[" or text
// starting with a quote is a TOML value, `["--mca", "a,b"]`), or a value of
// the key's Go type.
// The value itself is checked as in a file; rules between keys are checked
// by Validate, after all flags are set. A flag that changes mpi.launcher or
// mpi.flavor drops the profile's binary, args and bootstrap (and srun_mpi
// for a flavor, or a launcher other than srun) unless they are set on the
// command line too, before or after.
func (r *Resolved) Set(key string, value any, source string) error {
	fail := func(format string, a ...any) error {
		return &Problem{File: source, Msg: printable(key) + ": " + fmt.Sprintf(format, a...)}
	}
	if key == extendsKey {
		return fail("extends can only be set in a profile")
	}
	l, name, ok := lookupLeaf(key)
	if !ok {
		if key == VarsKey || key == VarsKey+"." {
			return fail("a table of variables: set one as %s.NAME=VALUE", VarsKey)
		}
		if s := suggest(key, mergeKeys()); s != "" {
			return fail("unknown key: did you mean %q?", s)
		}
		return fail("unknown key: want one of %s", strings.Join(Keys()[1:], ", "))
	}
	// A profile is TOML, which holds only UTF-8 text; show would print
	// U+FFFD for the bytes a flag gave.
	if bad := invalidUTF8(value); bad != "" {
		return fail("%q is not valid UTF-8 text", bad)
	}
	t := l.typ
	if name != "" {
		t = t.Elem()
	}
	var (
		v   reflect.Value
		err error
	)
	if s, ok := value.(string); ok && isTOMLValue(s, t) {
		if v, err = decodeTOMLValue(key, s); err != nil {
			return &Problem{File: source, Msg: err.Error()}
		}
	} else if v, err = convert(value, t); err != nil {
		return fail("%v", err)
	}
	var tmp Profile
	setLeaf(&tmp, key, v)
	if issues := checkLeaf(&tmp, key); len(issues) > 0 {
		return &Problem{File: source, Msg: issues[0].String()}
	}
	r.apply([]string{key}, &tmp, func(string) Origin { return Origin{Source: source} })
	return nil
}

// invalidUTF8 returns the first string in value (a string or a list of
// them) that is not valid UTF-8, or "".
func invalidUTF8(value any) string {
	switch v := value.(type) {
	case string:
		if !utf8.ValidString(v) {
			return v
		}
	case []string:
		for _, s := range v {
			if !utf8.ValidString(s) {
				return s
			}
		}
	}
	return ""
}

// convert turns a flag's value into Go type t.
func convert(value any, t reflect.Type) (reflect.Value, error) {
	rv := reflect.ValueOf(value)
	if !rv.IsValid() {
		return reflect.Value{}, fmt.Errorf("no value")
	}
	if rv.Type() == t {
		return rv, nil
	}
	if rv.Kind() == t.Kind() && rv.Kind() != reflect.Slice && rv.Type().ConvertibleTo(t) {
		return rv.Convert(t), nil
	}
	if s, ok := value.(string); ok {
		switch {
		case t.Kind() == reflect.String:
			return reflect.ValueOf(s).Convert(t), nil
		case t.Kind() == reflect.Bool:
			b, err := strconv.ParseBool(s)
			if err != nil {
				return reflect.Value{}, fmt.Errorf("want true or false, got %q", s)
			}
			return reflect.ValueOf(b), nil
		case t.Kind() == reflect.Int:
			n, err := strconv.Atoi(s)
			if err != nil {
				return reflect.Value{}, fmt.Errorf("want an integer, got %q", s)
			}
			return reflect.ValueOf(n), nil
		case t.Kind() == reflect.Slice:
			var parts []string
			for _, p := range strings.Split(s, ",") {
				if p = strings.TrimSpace(p); p != "" {
					parts = append(parts, p)
				}
			}
			return convert(parts, t)
		}
	}
	if ss, ok := value.([]string); ok && t == reflect.TypeOf([]Script(nil)) {
		scripts := make([]Script, 0, len(ss))
		for _, s := range ss {
			f := strings.Fields(s)
			if len(f) == 0 {
				continue
			}
			scripts = append(scripts, Script{Script: f[0], Args: f[1:]})
		}
		return reflect.ValueOf(scripts), nil
	}
	if n, ok := value.(int64); ok && t.Kind() == reflect.Int {
		return reflect.ValueOf(int(n)), nil
	}
	return reflect.Value{}, fmt.Errorf("want %s, got %T", strings.TrimPrefix(describeType(t), "a "), value)
}

// Validate checks the rules between keys of the merged profile: a flavor is
// set, srun's --mpi plugin is given only to srun and suits the flavor, and
// the bootstrap suits the flavor and launcher. Open MPI's allow_run_as_root
// and oversubscribe are ignored under another flavor rather than wrong here:
// they come from a layer written for Open MPI (checks of a single file do
// reject them).
func (r *Resolved) Validate() error {
	var ps problems
	p := &r.Profile
	at := func(key string, format string, a ...any) {
		o := r.origins[key]
		ps = append(ps, &Problem{File: o.Source, Line: o.Line, Col: o.Col, Msg: fmt.Sprintf(format, a...)})
	}
	flavor := p.MPI.Flavor
	if flavor == "" {
		ps = append(ps, &Problem{File: r.Path, Msg: fmt.Sprintf("no MPI flavor: set mpi.flavor to one of %s", closed.Join(mpirun.Flavors))})
	}
	// The launch line would refuse the plugin, with no file to point at.
	if p.MPI.SrunMPI != "" && p.MPI.Launcher != mpirun.ProgramSrun {
		at("mpi.srun_mpi", "mpi.srun_mpi: srun's --mpi plugin needs launcher srun (launcher %s from %s)", p.MPI.Launcher, r.origins["mpi.launcher"])
	}
	if p.MPI.Launcher == mpirun.ProgramSrun && flavor != "" {
		plugin := p.MPI.SrunMPI
		if plugin == "" {
			plugin = mpirun.DefaultSrunMPI(flavor)
		}
		if err := mpirun.CheckSrunMPI(flavor, plugin); err != nil {
			at("mpi.srun_mpi", "mpi.srun_mpi: %v (flavor %s from %s)", err, flavor, r.origins["mpi.flavor"])
		}
	}
	if b := p.MPI.Bootstrap; b != "" {
		if p.MPI.Launcher == mpirun.ProgramSrun {
			at("mpi.bootstrap", "mpi.bootstrap: srun takes no bootstrap (launcher srun from %s)", r.origins["mpi.launcher"])
		} else if err := mpirun.CheckBootstrap(flavor, b); flavor != "" && err != nil {
			at("mpi.bootstrap", "mpi.bootstrap: %v (flavor %s from %s)", err, flavor, r.origins["mpi.flavor"])
		}
	}
	return ps.err()
}

// Setting is one merged value and where it came from.
type Setting struct {
	Key    string // "slurm.partition", "env.vars.NAME"
	Value  string // as TOML
	Origin Origin
}

// Settings lists every key that has a value, in schema order, variables by
// name.
func (r *Resolved) Settings() []Setting {
	var out []Setting
	for _, l := range leafSpecs {
		keys := []string{l.key}
		if l.key == VarsKey {
			keys = nil
			for _, n := range sortedVarNames(r.Profile.Env.Vars) {
				keys = append(keys, VarsKey+"."+n)
			}
		}
		for _, k := range keys {
			o, ok := r.origins[k]
			if !ok {
				continue
			}
			v, _ := get(&r.Profile, k)
			out = append(out, Setting{Key: k, Value: formatValue(v), Origin: o})
		}
	}
	return out
}

// WriteTOML writes the merged profile as a TOML profile: every key that has
// a value, including defaults. Reading it back gives the same values.
func (r *Resolved) WriteTOML(w io.Writer) error {
	var b strings.Builder
	table := ""
	for _, s := range r.Settings() {
		// Ignored under another flavor (Validate), and an error in a file
		// with one: left out, so that the output is a valid profile.
		if o, ok := launcherOptions[s.Key]; ok && !mpirun.Takes(r.Profile.MPI.Flavor, o) {
			continue
		}
		t, key := tomlpos.ParentPath(s.Key), s.Key[strings.LastIndexByte(s.Key, '.')+1:]
		if strings.HasPrefix(s.Key, VarsKey+".") {
			t, key = VarsKey, tomlpos.Seg(strings.TrimPrefix(s.Key, VarsKey+"."))
		}
		if t != table {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "[%s]\n", t)
			table = t
		}
		value := s.Value
		if s.Key == "env.source" && len(r.Profile.Env.Source) > 1 {
			var lines []string
			for _, sc := range r.Profile.Env.Source {
				lines = append(lines, "  "+formatValue(reflect.ValueOf(sc))+",\n")
			}
			value = "[\n" + strings.Join(lines, "") + "]"
		}
		fmt.Fprintf(&b, "%s = %s\n", key, value)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
