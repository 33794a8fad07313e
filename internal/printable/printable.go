// Package printable makes text that batchkit did not write itself (what a
// tool printed, a file's contents, an error quoting either) safe to print
// on one line of a terminal, and small.
//
// A terminal obeys what it is sent: ESC ]0;title BEL retitles the window,
// ESC [2J clears it, a CR overwrites the start of the line, a bidi override
// reorders what follows. So every rune that strconv.IsPrint refuses (C0
// and C1 controls, DEL, line breaks, tab, bidi and other format
// characters, spaces other than U+0020) is written as its Go escape —
// \x1b, \a, \r, \n, \t, \u009b, \u202e — and each byte of invalid UTF-8 as
// \xNN. Backslashes are left as they are: the text is for reading, not for
// unquoting, and that makes Line idempotent.
package printable

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Line is s fit for one line: escaped as the package says and, with
// max > 0, at most max bytes long. A string that does not fit is cut at a
// rune and ends in "… [N more bytes]", N counting the bytes of s not
// shown. Line(Line(s, max), max) == Line(s, max).
func Line(s string, max int) string {
	if plain(s) && (max <= 0 || len(s) <= max) {
		return s
	}
	return fit(s, max, 0, linePiece)
}

// Quote is strconv.Quote(s) for a string that may be long: with max > 0,
// at most max bytes, the quoted part cut at a rune and followed by
// "… [N more bytes]" when s does not fit.
func Quote(s string, max int) string {
	return fit(s, max, 2, quotePiece)
}

// plain: nothing in s needs an escape.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f { // not printable ASCII: look closer
			return plainRunes(s[i:])
		}
	}
	return true
}

func plainRunes(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !strconv.IsPrint(r) {
			return false
		}
		i += size
	}
	return true
}

// linePiece is one rune (or invalid byte) of s as Line writes it.
func linePiece(p string) string {
	r, size := utf8.DecodeRuneInString(p)
	if (r == utf8.RuneError && size == 1) || !strconv.IsPrint(r) {
		return quotePiece(p) // \x1b, \n, \u202e, \xff
	}
	return p
}

// quotePiece is one rune (or invalid byte) of s as strconv.Quote writes it
// inside the quotes: strconv.Quote works rune by rune.
func quotePiece(p string) string {
	q := strconv.Quote(p)
	return q[1 : len(q)-1]
}

// fit writes s rune by rune (an invalid byte as one), each through piece,
// within max bytes (no limit: max <= 0); quotes == 2 wraps the result in
// double quotes, which count.
func fit(s string, max, quotes int, piece func(string) string) string {
	cut := max > 0 && escapedLen(s, piece, max) > max-quotes
	room := max - quotes
	if reserve := len(note(len(s))); cut && room > reserve {
		room -= reserve // for the note, with N as long as it can be
	}
	var b strings.Builder
	if quotes > 0 {
		b.WriteByte('"')
	}
	i, n := 0, 0
	for i < len(s) {
		_, size := utf8.DecodeRuneInString(s[i:])
		p := piece(s[i : i+size])
		if cut && n+len(p) > room {
			break
		}
		b.WriteString(p)
		i, n = i+size, n+len(p)
	}
	if quotes > 0 {
		b.WriteByte('"')
	}
	if nt := note(len(s) - i); i < len(s) && b.Len()+len(nt) <= max {
		b.WriteString(nt)
	}
	return b.String()
}

// escapedLen is how long s is once written through piece, counted up to
// just past limit.
func escapedLen(s string, piece func(string) string, limit int) int {
	n := 0
	for i := 0; i < len(s) && n <= limit; {
		_, size := utf8.DecodeRuneInString(s[i:])
		n += len(piece(s[i : i+size]))
		i += size
	}
	return n
}

// note says how much of a text is not shown.
func note(more int) string {
	if more == 1 {
		return "… [1 more byte]"
	}
	return "… [" + strconv.Itoa(more) + " more bytes]"
}
