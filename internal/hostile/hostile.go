// Package hostile makes deterministic strings built to break shell quoting:
// the inputs of batchkit's injection tests.
package hostile

import (
	"math/rand"
	"strings"
)

// Marker is the file a hostile string tries to create; a test that finds it
// has found a string that executed.
const Marker = "PWNED"

var atoms = []string{"a", "Z", "9", " ", "\t", "'", `"`, "`", "$", "$(", ")", "${HOME}", "\\", ";", "|", "&", "&&", ">",
	"<", "*", "?", "[", "]", "{", "}", "~", "#", "!", "=", "%", "-", "--", "é", "日本", "\x01",
	"$(touch " + Marker + ")", "`touch " + Marker + "`", "'; touch " + Marker + "; '"}

// Strings returns n strings of up to 12 atoms from a fixed seed. With
// newlines, line breaks are among the atoms.
func Strings(seed int64, n int, newlines bool) []string {
	pool := atoms
	if newlines {
		pool = append(append([]string{}, atoms...), "\n", "\r\n")
	}
	r := rand.New(rand.NewSource(seed))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for j := r.Intn(12); j >= 0; j-- {
			b.WriteString(pool[r.Intn(len(pool))])
		}
		out[i] = b.String()
	}
	return out
}
