package envsetup

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/batchkit/batchkit/internal/jsonstr"
)

// Script is a shell script to source, with the arguments it gets as its
// positional parameters ($1 ...).
type Script struct {
	Path string
	Args []string
}

// Changes is what sourcing did to the environment: variables set (added or
// changed) and variables removed. Applying it to the environment the
// scripts started from gives the environment they left behind.
type Changes struct {
	Set   map[string]string // JSON: MarshalJSON
	Unset []string          // sorted
}

// changesJSON is Changes in JSON: {"set": {...}, "unset": [...]}, never
// null, the values in jsonstr's lossless encoding (a byte of invalid UTF-8
// as \udcXX); names are shell identifiers, plain ASCII.
type changesJSON struct {
	Set   map[string]jsonstr.String `json:"set"`
	Unset []string                  `json:"unset"`
}

// MarshalJSON writes c as changesJSON: a value with any bytes a script set
// comes back whole (encoding/json would make each invalid byte U+FFFD).
func (c Changes) MarshalJSON() ([]byte, error) {
	unset := c.Unset
	if unset == nil {
		unset = []string{}
	}
	return json.Marshal(changesJSON{Set: jsonstr.Map(c.Set), Unset: unset})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Changes) UnmarshalJSON(b []byte) error {
	var j changesJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	c.Set = make(map[string]string, len(j.Set))
	for k, v := range j.Set {
		c.Set[k] = string(v)
	}
	c.Unset = j.Unset
	if c.Unset == nil {
		c.Unset = []string{}
	}
	return nil
}

// Empty reports whether c changes nothing.
func (c Changes) Empty() bool { return len(c.Set) == 0 && len(c.Unset) == 0 }

// Diff is the change from before to after. Variables bash keeps for itself
// (see ignored) and names no shell can export are left out: they say
// nothing about the scripts, and the shell format could not print them.
func Diff(before, after map[string]string) Changes {
	c := Changes{Set: map[string]string{}, Unset: []string{}}
	for k, v := range after {
		if ignored(k) {
			continue
		}
		if old, ok := before[k]; !ok || old != v {
			c.Set[k] = v
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok && !ignored(k) {
			c.Unset = append(c.Unset, k)
		}
	}
	slices.Sort(c.Unset)
	return c
}

// Apply returns environ with c applied: removed variables dropped, set
// ones replaced where they stood (later duplicates dropped, since a
// program would see only one), new ones appended in name order.
func Apply(environ []string, c Changes) []string {
	out := make([]string, 0, len(environ)+len(c.Set))
	done := map[string]bool{}
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(c.Unset, k) {
			continue
		}
		v, set := c.Set[k]
		switch {
		case !set:
			out = append(out, kv)
		case !done[k]:
			out = append(out, k+"="+v)
			done[k] = true
		}
	}
	for _, k := range sortedKeys(c.Set) {
		if !done[k] {
			out = append(out, k+"="+c.Set[k])
		}
	}
	return out
}

// WithVars layers a profile's variables over sourced changes, both relative
// to environ, the environment before sourcing. The rule is the batch
// template's (batchkit_user, batchkit_export): a variable the user had exported before keeps
// the user's value, even where a script changed it; any other gets the
// profile's value, over what a script set.
//
// Per-rank pinning variables (issue 20, section 3) are a further layer
// after this one.
func WithVars(environ []string, sourced Changes, vars map[string]string) Changes {
	user := Environ(environ)
	out := Changes{Set: make(map[string]string, len(sourced.Set)+len(vars)), Unset: []string{}}
	for k, v := range sourced.Set {
		out.Set[k] = v
	}
	for _, k := range sourced.Unset {
		if _, ok := vars[k]; !ok {
			out.Unset = append(out.Unset, k)
		}
	}
	for k, v := range vars {
		if _, had := user[k]; had {
			delete(out.Set, k) // the user's value, as it is in environ
			continue
		}
		out.Set[k] = v
	}
	return out
}

// Environ turns an environ list into a map; of duplicates the last wins,
// as os/exec passes it on.
func Environ(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// ParseDump reads `env -0` output: NAME=VALUE entries ended by NUL bytes.
// A value may hold newlines; an entry without = is skipped.
func ParseDump(b []byte) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// DedupeLists removes repeated entries, the first kept, from the colon
// lists (PATH and every *PATH variable) that changed from before to after.
// Scripts prepend without looking (oneAPI's --force run twice puts each
// directory on PATH twice); with duplicates gone, sourcing again in the
// environment it produced changes nothing.
func DedupeLists(before, after map[string]string) map[string]string {
	out := make(map[string]string, len(after))
	for k, v := range after {
		if strings.HasSuffix(k, "PATH") && before[k] != v {
			v = dedupe(v)
		}
		out[k] = v
	}
	return out
}

func dedupe(list string) string {
	seen := map[string]bool{}
	var keep []string
	for _, e := range strings.Split(list, ":") {
		if !seen[e] {
			seen[e] = true
			keep = append(keep, e)
		}
	}
	return strings.Join(keep, ":")
}

// ignored reports the variables bash sets or exports on its own (its
// level, working directories, options, exported functions as BASH_FUNC_*),
// the runner's own (__batchkit_*), and names that are not shell
// identifiers.
func ignored(name string) bool {
	switch name {
	case "SHLVL", "_", "PWD", "OLDPWD", "SHELLOPTS", "BASHOPTS", "PS4", "IFS":
		return true
	}
	return strings.HasPrefix(name, "BASH_") || strings.HasPrefix(name, "__batchkit_") || !ValidName(name)
}

// ValidName reports whether name is a shell identifier: letters, digits
// and _, not starting with a digit.
func ValidName(name string) bool {
	if name == "" || '0' <= name[0] && name[0] <= '9' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
