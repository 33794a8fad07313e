package profile

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// A flag's text is normally the short form of its key's value: "true",
// "8080", a list comma-separated. A list whose elements hold commas
// (mpi.args = ["--mca", "a,b"]) cannot be written so, and the short form
// split such a literal at its commas; so text that opens a TOML value of
// the key's kind is read as TOML, as a profile file would write it.

// tomlOpeners are the first characters that make a flag's text a TOML value
// of a key's kind: a list literal for a list, a quoted string for text.
var tomlOpeners = map[reflect.Kind]string{
	reflect.Slice:  "[",
	reflect.String: `"'`,
}

// isTOMLValue reports whether a flag's text s for a key of type t is a TOML
// value rather than the short form.
func isTOMLValue(s string, t reflect.Type) bool {
	s = strings.TrimLeft(s, " \t")
	return s != "" && strings.ContainsRune(tomlOpeners[t.Kind()], rune(s[0]))
}

// decodeTOMLValue reads s as the TOML value of key, decoded and checked as
// the same line in a profile file would be. The error names key, on one
// line.
func decodeTOMLValue(key, s string) (reflect.Value, error) {
	_, at, ok := leafAt(key)
	if !ok {
		return reflect.Value{}, fmt.Errorf("%s: unknown key", printable(key))
	}
	name := at.String() // key, on one line
	doc := at.tomlKey() + " = " + s
	var top map[string]any
	md, err := toml.Decode(doc, &top)
	if err != nil {
		return reflect.Value{}, fmt.Errorf("%s: not a TOML value: %s", name, tomlMessage(err))
	}
	// A newline in the text could go on to set other keys.
	if other := keyOutside(md.Keys(), at); other != "" {
		return reflect.Value{}, fmt.Errorf("%s: one TOML value, please: the text after it sets %s", name, other)
	}
	f, ps := parse("", "", "", []byte(doc))
	if len(ps) > 0 {
		msg := ps[0].Msg
		if !strings.HasPrefix(msg, name) {
			msg = name + ": " + msg
		}
		return reflect.Value{}, errors.New(msg)
	}
	v, _ := get(&f.Profile, key)
	return v, nil
}

// keyOutside returns the first of keys that is neither at nor around nor
// inside it (an inline table's keys are inside), or "".
func keyOutside(keys []toml.Key, at keyPath) string {
	var want []string
	for _, s := range at.steps {
		want = append(want, s.key)
	}
	for _, k := range keys {
		n := min(len(k), len(want))
		if !slices.Equal(k[:n], want[:n]) {
			return k.String()
		}
	}
	return ""
}
