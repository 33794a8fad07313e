package profile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/infile"
	"github.com/batchkit/batchkit/profile/internal/tomlpos"
	siteconfigs "github.com/batchkit/batchkit/site-configs"
)

var errNotDir error = syscall.ENOTDIR

// SystemDir is where a site installs its profiles.
const SystemDir = "/etc/batchkit/profiles"

// DefaultProfile is the profile used when none is named and BATCHKIT_PROFILE
// is not set.
const DefaultProfile = "local"

// DefaultName returns the profile to use when none is named: $BATCHKIT_PROFILE,
// else DefaultProfile.
func DefaultName(getenv func(string) string) string {
	if v := getenv(envvars.Profile); v != "" {
		return v
	}
	return DefaultProfile
}

// Loader finds profiles: NAME.toml in each of Dirs in order, then in
// Embedded. The first found wins and shadows the others of that name.
type Loader struct {
	Dirs     []string // searched in order
	Embedded fs.FS    // searched last; NAME.toml at its root; nil for none
}

// NewLoader returns batchkit's search path: each directory of
// $BATCHKIT_PROFILE_PATH (colon-separated), the user's
// os.UserConfigDir()/batchkit/profiles, SystemDir, then the profiles built
// into batchkit (site-configs/).
func NewLoader(getenv func(string) string) *Loader {
	var dirs []string
	for _, d := range filepath.SplitList(getenv(envvars.ProfilePath)) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	if d, err := os.UserConfigDir(); err == nil {
		dirs = append(dirs, filepath.Join(d, "batchkit", "profiles"))
	}
	dirs = append(dirs, SystemDir)
	return &Loader{Dirs: dirs, Embedded: siteconfigs.FS}
}

// IsPath reports whether a --profile value is a file path rather than a
// name: it contains a / or ends in .toml.
func IsPath(s string) bool {
	return strings.Contains(s, "/") || strings.HasSuffix(s, ".toml")
}

// Entry is a profile file found by a Loader.
type Entry struct {
	Name        string
	Path        string // a file path, or "embedded:NAME.toml"
	Dir         string // the search directory it is in; "" when embedded or given as a path
	Shadowed    bool   // an entry of the same name earlier in the search order wins
	Description string // filled by List
	Err         error  // by List: the file's problems, if any
}

// Embedded reports whether the entry is built into batchkit.
func (e Entry) Embedded() bool { return strings.HasPrefix(e.Path, embeddedPrefix) }

// id identifies the file for cycle detection.
func (e Entry) id() string {
	if e.Embedded() {
		return e.Path
	}
	if abs, err := filepath.Abs(e.Path); err == nil {
		return abs
	}
	return filepath.Clean(e.Path)
}

// candidates lists every file for name, in search order.
func (l *Loader) candidates(name string) []Entry {
	var out []Entry
	for _, dir := range l.Dirs {
		p := filepath.Join(dir, name+".toml")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			out = append(out, Entry{Name: name, Path: p, Dir: dir})
		}
	}
	if l.Embedded != nil {
		if fi, err := fs.Stat(l.Embedded, name+".toml"); err == nil && !fi.IsDir() {
			out = append(out, Entry{Name: name, Path: embeddedPrefix + name + ".toml"})
		}
	}
	return out
}

// Find locates a profile by name (the first in the search order) or by path.
func (l *Loader) Find(nameOrPath string) (Entry, error) {
	if nameOrPath == "" {
		return Entry{}, errors.New("empty profile name")
	}
	if IsPath(nameOrPath) {
		fi, err := os.Stat(nameOrPath)
		if err != nil {
			return Entry{}, fmt.Errorf("profile %s: %w", nameOrPath, unwrapPathError(err))
		}
		if fi.IsDir() {
			return Entry{}, fmt.Errorf("profile %s: is a directory", nameOrPath)
		}
		return Entry{Name: strings.TrimSuffix(filepath.Base(nameOrPath), ".toml"), Path: nameOrPath}, nil
	}
	if c := l.candidates(nameOrPath); len(c) > 0 {
		return c[0], nil
	}
	return Entry{}, l.notFound(nameOrPath)
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (l *Loader) notFound(name string) error {
	where := append([]string(nil), l.Dirs...)
	if l.Embedded != nil {
		where = append(where, "the embedded profiles")
	}
	msg := fmt.Sprintf("profile %q not found in %s", name, strings.Join(where, ", "))
	var names []string
	if entries, err := l.entries(); err == nil {
		for _, e := range entries {
			if !e.Shadowed {
				names = append(names, e.Name)
			}
		}
	}
	if s := suggest(name, names); s != "" {
		msg += fmt.Sprintf(": did you mean %q?", s)
	} else if len(names) > 0 {
		msg += " (have " + strings.Join(names, ", ") + ")"
	}
	return errors.New(msg)
}

// findBase locates the profile that from extends. A name is searched like
// Find, except that a profile extending its own name gets the next one of
// that name in the search order: a user's intel-oneccl.toml can extend the
// site's intel-oneccl. A relative path is relative to from's directory.
func (l *Loader) findBase(name string, from Entry) (Entry, error) {
	if IsPath(name) {
		if from.Embedded() {
			return Entry{}, fmt.Errorf("an embedded profile cannot extend a path (%s)", name)
		}
		if !filepath.IsAbs(name) {
			name = filepath.Join(filepath.Dir(from.Path), name)
		}
		return l.Find(name)
	}
	cands := l.candidates(name)
	if name == from.Name {
		self := from.id()
		for i, c := range cands {
			if c.id() == self {
				cands = cands[i+1:]
				break
			}
		}
		if len(cands) == 0 {
			return Entry{}, fmt.Errorf("profile %q extends %q, and there is no other %q after it in the search path", from.Name, name, name)
		}
	}
	if len(cands) == 0 {
		return Entry{}, l.notFound(name)
	}
	return cands[0], nil
}

// Load reads and parses one entry's file on its own.
func (l *Loader) Load(e Entry) (*File, error) {
	f, ps := l.load(e)
	return f, ps.err()
}

// MaxFileBytes bounds a profile file: a site's is a few KiB.
const MaxFileBytes = 1 << 20

func (l *Loader) load(e Entry) (*File, problems) {
	var (
		src []byte
		err error
		dir string
	)
	if e.Embedded() {
		if l.Embedded == nil {
			err = fs.ErrNotExist
		} else {
			src, err = fs.ReadFile(l.Embedded, strings.TrimPrefix(e.Path, embeddedPrefix))
		}
	} else {
		src, err = infile.Read(e.Path, MaxFileBytes)
		if abs, aerr := filepath.Abs(filepath.Dir(e.Path)); aerr == nil {
			dir = abs
		}
	}
	if err != nil {
		return &File{Name: e.Name, Path: e.Path, keys: map[string]tomlpos.Pos{}}, problems{{File: e.Path, Msg: unwrapPathError(err).Error()}}
	}
	return parse(e.Name, e.Path, dir, src)
}

// Resolve finds a profile by name or path, follows its extends chain and
// merges it (see Merge), then validates the result. The error lists every
// problem of every file in the chain (a *multierror.Error of *Problem), or
// says the profile was not found.
func (l *Loader) Resolve(nameOrPath string) (*Resolved, error) {
	e, err := l.Find(nameOrPath)
	if err != nil {
		return nil, err
	}
	return l.resolve(e)
}

// resolve merges e with the profiles it extends and validates the result.
func (l *Loader) resolve(e Entry) (*Resolved, error) {
	var (
		ps    problems
		chain []*File
		names []string
		seen  = map[string]int{}
	)
	for {
		f, fps := l.load(e)
		ps = append(ps, fps...)
		seen[e.id()] = len(chain)
		chain = append(chain, f)
		names = append(names, e.Name)
		if f.Profile.Extends == "" {
			break
		}
		at := f.pos.Lookup(extendsKey, false)
		next, err := l.findBase(f.Profile.Extends, e)
		if err != nil {
			ps.add(f.Path, at, "extends: %v", err)
			break
		}
		if i, ok := seen[next.id()]; ok {
			cycle := append(append([]string(nil), names[i:]...), next.Name)
			ps.add(f.Path, at, "extends cycle: %s", strings.Join(cycle, " → "))
			break
		}
		e = next
	}
	if len(ps) > 0 {
		return nil, ps.err()
	}
	r := Merge(chain...)
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// List returns every profile in the search path, sorted by name and, within
// a name, in search order: all but the first of a name are Shadowed. Each
// file is parsed for its description; Err is set for a file that does not
// parse, and for one whose merge with what it extends does not resolve (a
// missing base, a cycle, no flavor): what `profile check` would say.
func (l *Loader) List() ([]Entry, error) {
	out, err := l.entries()
	if err != nil {
		return nil, err
	}
	for i := range out {
		f, ps := l.load(out[i])
		out[i].Description = f.Profile.Description
		if out[i].Err = ps.err(); out[i].Err == nil {
			_, out[i].Err = l.resolve(out[i])
		}
	}
	return out, nil
}

// Names lists the names of the profiles on the search path, sorted, each
// once, without reading them: what shell completion offers for --profile.
func (l *Loader) Names() ([]string, error) {
	es, err := l.entries()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range es {
		if !e.Shadowed {
			names = append(names, e.Name)
		}
	}
	return names, nil
}

// entries lists the profiles of the search path by name, sorted, without
// reading them (notFound's suggestions need no more).
func (l *Loader) entries() ([]Entry, error) {
	var out []Entry
	seen := map[string]bool{}
	add := func(e Entry) {
		e.Shadowed = seen[e.Name]
		seen[e.Name] = true
		out = append(out, e)
	}
	for _, dir := range l.Dirs {
		des, err := os.ReadDir(dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir) {
				continue
			}
			return nil, fmt.Errorf("profile directory %s: %w", dir, unwrapPathError(err))
		}
		for _, de := range des {
			name, ok := strings.CutSuffix(de.Name(), ".toml")
			if !ok || name == "" || de.IsDir() {
				continue
			}
			add(Entry{Name: name, Path: filepath.Join(dir, de.Name()), Dir: dir})
		}
	}
	if l.Embedded != nil {
		des, err := fs.ReadDir(l.Embedded, ".")
		if err != nil {
			return nil, fmt.Errorf("embedded profiles: %w", err)
		}
		for _, de := range des {
			if name, ok := strings.CutSuffix(de.Name(), ".toml"); ok && name != "" && !de.IsDir() {
				add(Entry{Name: name, Path: embeddedPrefix + de.Name()})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ResolveWith resolves the profile name (a file or a name) and puts sets,
// KEY=VALUE each as a command-line flag would give it, on top; the result
// is validated.
func (l *Loader) ResolveWith(name string, sets []string) (*Resolved, error) {
	r, err := l.Resolve(name)
	if err != nil {
		return nil, err
	}
	for _, kv := range sets {
		k, v, _ := strings.Cut(kv, "=")
		if err := r.Set(k, v, CommandLine); err != nil {
			return nil, err
		}
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}
