// Package jsonstr writes strings that may hold any bytes (a variable's
// value, a command's argument) as JSON strings that lose none of them.
//
// JSON text is Unicode, and encoding/json replaces each byte of invalid
// UTF-8 with U+FFFD: two different values print the same. Here such a
// byte, always 0x80-0xff, is written as the lone surrogate \udc80-\udcff
// of its value instead: PEP 383's "surrogateescape", which is how Python
// holds the bytes of os.environ and sys.argv that are not UTF-8, so that
// json.loads gives back a str that os.fsencode, os.environ and subprocess
// turn into the very bytes. Valid UTF-8 never holds a surrogate (their
// encodings are themselves invalid UTF-8, escaped byte by byte), so the
// mapping is one to one; Unquote inverts it. Decoders that do not know the
// convention (Go's encoding/json, jq) read such a string with U+FFFD.
package jsonstr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// String is a string that marshals losslessly (Quote) and unmarshals
// Unquote's way.
type String string

// MarshalJSON implements json.Marshaler.
func (s String) MarshalJSON() ([]byte, error) { return []byte(Quote(string(s))), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (s *String) UnmarshalJSON(b []byte) error {
	v, err := Unquote(string(b))
	*s = String(v)
	return err
}

// Strings converts a []string for marshalling.
func Strings(ss []string) []String {
	out := make([]String, len(ss))
	for i, s := range ss {
		out[i] = String(s)
	}
	return out
}

// Map converts a map's values for marshalling (the keys of the maps
// batchkit prints are variable names, plain ASCII).
func Map(m map[string]string) map[string]String {
	out := make(map[string]String, len(m))
	for k, v := range m {
		out[k] = String(v)
	}
	return out
}

const hex = "0123456789abcdef"

// Quote is s as a JSON string literal: `"` and `\` escaped, control
// characters (and U+2028, U+2029, which JavaScript takes for line breaks)
// as \n, \t, \u00XX, each byte of invalid UTF-8 as \udcXX.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\udc`)
			b.WriteByte(hex[s[i]>>4])
			b.WriteByte(hex[s[i]&0xf])
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// ErrSyntax is a literal Unquote cannot read.
var ErrSyntax = errors.New("jsonstr: invalid JSON string")

// Unquote reads a JSON string literal, giving a lone surrogate
// \udc80-\udcff back as its byte; any other lone surrogate is U+FFFD, as
// encoding/json reads it.
func Unquote(lit string) (string, error) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", ErrSyntax
	}
	s := lit[1 : len(lit)-1]
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c < 0x20:
			return "", ErrSyntax
		case c != '\\':
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", ErrSyntax
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(s[i+2:])
			if !ok {
				return "", ErrSyntax
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r2, ok := lowSurrogate(s[i:]); ok && utf16.DecodeRune(r, r2) != utf8.RuneError {
					b.WriteRune(utf16.DecodeRune(r, r2))
					i += 6
					continue
				}
				if 0xdc80 <= r && r <= 0xdcff {
					b.WriteByte(byte(r - 0xdc00))
					continue
				}
				r = utf8.RuneError
			}
			b.WriteRune(r)
			continue
		default:
			return "", ErrSyntax
		}
		i += 2
	}
	return b.String(), nil
}

// hex4 reads the 4 hex digits at the start of s.
func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(s[:4], 16, 16)
	return rune(n), err == nil
}

// lowSurrogate reads a \uXXXX at the start of s.
func lowSurrogate(s string) (rune, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	return hex4(s[2:])
}
