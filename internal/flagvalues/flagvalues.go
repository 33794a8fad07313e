// Package flagvalues gives a command's string flag the values shell
// completion offers after it. A flag's values are the rows the command
// parses it with (mpirun.Flavors, collective.Kinds, a table of output
// formats, the profiles on the search path ...), handed in as a function,
// so that completion never keeps a list of its own.
package flagvalues

import (
	"maps"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// Flag is a string flag with the function that lists its values. It is a
// cli.Flag like the StringFlag it holds: parsing, help and the man page
// see that one.
type Flag struct {
	*cli.StringFlag
	Values func() []string
}

// With gives f the values completion offers after it.
func With(f *cli.StringFlag, values func() []string) cli.Flag {
	return Flag{f, values}
}

// List returns the members of a closed set, as strings.
func List[T ~string](set []T) func() []string {
	return func() []string {
		out := make([]string, len(set))
		for i, v := range set {
			out[i] = string(v)
		}
		return out
	}
}

// Keys returns the keys of the table a flag's value is looked up in,
// sorted.
func Keys[V any](table map[string]V) func() []string {
	return func() []string { return slices.Sorted(maps.Keys(table)) }
}

// Of lists f's values that start with prefix: none for a flag without
// values, or when none fits (the shell then completes file names).
func Of(f cli.Flag, prefix string) []string {
	vf, ok := f.(Flag)
	if !ok {
		return nil
	}
	var out []string
	for _, v := range vf.Values() {
		if strings.HasPrefix(v, prefix) {
			out = append(out, v)
		}
	}
	return out
}
