// Package closed parses closed string types (an MPI flavor, a launcher, a
// port policy): a value is valid only if it is one of a fixed list, and the
// error names the list.
package closed

import (
	"fmt"
	"strings"
)

// Parse returns the member of valid equal to s, or an error
// `unknown KIND "s": want one of a, b, c`.
func Parse[T ~string](kind, s string, valid []T) (T, error) {
	for _, v := range valid {
		if string(v) == s {
			return v, nil
		}
	}
	return "", fmt.Errorf("unknown %s %q: want one of %s", kind, s, Join(valid))
}

// Unmarshal is Parse for an UnmarshalText method: it sets *dst only on success.
func Unmarshal[T ~string](dst *T, kind string, b []byte, valid []T) error {
	v, err := Parse(kind, string(b), valid)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// Join lists the members, comma-separated.
func Join[T ~string](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}
