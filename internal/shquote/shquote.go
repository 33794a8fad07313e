// Package shquote quotes values for the shell text batchkit prints or
// writes: `env --format shell` and `--format torchrun` output, the
// generated batch scripts, mpirun --dry-run lines and the source lines it
// suggests.
//
// Every value that needs quoting is POSIX single-quoted, and a single
// quote in it is written as quote, backslash, quote, quote:
//
//	it's  ->  'it'\''s'
//
// dash, bash and zsh all read that the same way, byte for byte, whatever
// the bytes are. bash's $'...', which batchkit once printed for control
// characters, is bash's alone: dash (Debian's /bin/sh) reads it as $ and a
// plain single-quoted string, where \' ends the quote early, so in
// `eval "$(batchkit env --format shell)"` the rest of the value ran.
package shquote

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNUL is what a value with a NUL byte fails with: no program can
// receive one (argv and the environment end a string there), and cutting
// the value short would change it silently.
var ErrNUL = errors.New("contains a NUL byte, which no shell or program can receive")

// NULError names the value that holds a NUL byte; it unwraps to ErrNUL.
type NULError struct{ Value string }

func (e *NULError) Error() string { return fmt.Sprintf("value %q %v", e.Value, ErrNUL) }

func (e *NULError) Unwrap() error { return ErrNUL }

// Quote returns s as one shell word that dash, bash and zsh all read as
// exactly s, in a command's arguments and on an assignment's right-hand
// side alike. A plain word (see plain) stays as it is, for readable
// scripts; anything else is single-quoted, the empty string too.
func Quote(s string) (string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return "", &NULError{Value: s}
	}
	if plain(s) {
		return s, nil
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'", nil
}

// Join quotes each argument and joins them with spaces: a command line that
// runs exactly args.
func Join(args []string) (string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		q, err := Quote(a)
		if err != nil {
			return "", err
		}
		out[i] = q
	}
	return strings.Join(out, " "), nil
}

// plain reports whether s is literal unquoted in dash, bash and zsh:
// letters, digits and _ @ % + , . / : - =, where = may be neither first
// (zsh's EQUALS expansion makes =ls /usr/bin/ls) nor after a colon (zsh
// expands it there on an assignment's right-hand side: V=a:=ls). No ~,
// which expands at the start or after = or :, and no #, which starts a
// comment. NAME=value is quoted too: as a command's first word it would be
// an assignment, not the command.
func plain(s string) bool {
	if s == "" || s[0] == '=' || assignment(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("_@%+,./:-", c) >= 0:
		case c == '=' && s[i-1] != ':':
		default:
			return false
		}
	}
	return true
}

// assignment reports whether s starts with NAME=, a shell variable name
// and an equals sign.
func assignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" || '0' <= name[0] && name[0] <= '9' {
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
