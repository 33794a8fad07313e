// Package tomlpos finds where each key and value of a TOML document
// starts, under its full path with array indices ("env.source[1].script"),
// for profile's problems and provenance; and writes such paths.
package tomlpos

import (
	"regexp"
	"strconv"
	"strings"
)

// BurntSushi/toml v1.6 keeps key positions private (MetaData has no
// Position accessor), and inside arrays of tables it keys them without the
// element index, so the last [[env.source]] would win. Scan
// therefore re-reads the document, which the toml parser has already
// accepted, and records where every key and value starts, under its full
// path with array indices: "env.source[1].script".

// Pos is a 1-based line and byte column.
type Pos struct{ Line, Col int }

// Positions are where a document's keys and values start, by path with
// array indices.
type Positions struct {
	Key map[string]Pos // where the key is written
	Val map[string]Pos // where its value starts

	// defs is every place a key or table is written, in document order,
	// repeats and the implicit tables of dotted keys included: the first
	// position of a key is not where it is redefined.
	defs []def
}

type def struct {
	path string // with array indices
	at   Pos
}

// Redefinition returns where key (a path without array indices, as the toml
// package names it) is written last at or before the position at which the
// parser gave up on it: the definition being parsed then.
func (p Positions) Redefinition(key string, before Pos) (Pos, bool) {
	var at Pos
	found := false
	for _, d := range p.defs {
		if d.at.Line > before.Line || d.at.Line == before.Line && d.at.Col > before.Col {
			break
		}
		if StripIndices(d.path) == key {
			at, found = d.at, true
		}
	}
	return at, found
}

// Lookup returns the position of path's value (or key), falling back to the
// nearest enclosing key that has one.
func (p Positions) Lookup(path string, key bool) Pos {
	for path != "" {
		if key {
			if q, ok := p.Key[path]; ok {
				return q
			}
		}
		if q, ok := p.Val[path]; ok {
			return q
		}
		if q, ok := p.Key[path]; ok {
			return q
		}
		path = ParentPath(path)
	}
	return Pos{1, 1}
}

// ParentPath strips the last segment or index of a path.
func ParentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndexByte(path, '['); i >= 0 {
			return path[:i]
		}
	}
	// The last '.' outside quotes.
	inQuote := false
	last := -1
	for i := 0; i < len(path); i++ {
		switch path[i] {
		case '\\':
			if inQuote {
				i++
			}
		case '"':
			inQuote = !inQuote
		case '.':
			if !inQuote {
				last = i
			}
		}
	}
	if last < 0 {
		return ""
	}
	return path[:last]
}

// Seg writes one key segment the way toml.Key.String does: bare when it can
// be, quoted otherwise.
func Seg(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return strconv.Quote(s)
		}
	}
	return s
}

// JoinPath appends segs to base, each written as Seg writes it.
func JoinPath(base string, segs ...string) string {
	for _, s := range segs {
		if base == "" {
			base = Seg(s)
		} else {
			base += "." + Seg(s)
		}
	}
	return base
}

// IndexPath is element i of the array at base.
func IndexPath(base string, i int) string { return base + "[" + strconv.Itoa(i) + "]" }

// withoutBOM is src as the toml package lexes it: without a byte order
// mark, which editors do not show either (columns count from after it).
func withoutBOM(src string) string {
	for _, bom := range []string{"\xef\xbb\xbf", "\xff\xfe", "\xfe\xff"} {
		if s, ok := strings.CutPrefix(src, bom); ok {
			return s
		}
	}
	return src
}

// OffsetPos is the line and column of byte offset off into the document
// the toml package lexes.
func OffsetPos(src string, off int) (Pos, bool) {
	src = withoutBOM(src)
	if off < 0 || off > len(src) {
		return Pos{}, false
	}
	line := 1 + strings.Count(src[:off], "\n")
	return Pos{line, off - strings.LastIndexByte(src[:off], '\n')}, true
}

type posScanner struct {
	src       string
	i         int
	line, col int
	p         Positions
	table     string         // the current [table] or [[array]] element path
	arrayNext map[string]int // array-of-tables path → number of elements so far
}

// Scan records the positions of src, a document the toml parser accepts.
func Scan(src string) Positions {
	s := &posScanner{
		src: withoutBOM(src), line: 1, col: 1,
		p:         Positions{Key: map[string]Pos{}, Val: map[string]Pos{}},
		arrayNext: map[string]int{},
	}
	s.document()
	return s.p
}

func (s *posScanner) eof() bool { return s.i >= len(s.src) }

func (s *posScanner) peek() byte {
	if s.eof() {
		return 0
	}
	return s.src[s.i]
}

func (s *posScanner) peekAt(n int) byte {
	if s.i+n >= len(s.src) {
		return 0
	}
	return s.src[s.i+n]
}

func (s *posScanner) adv() {
	if s.eof() {
		return
	}
	if s.src[s.i] == '\n' {
		s.line++
		s.col = 1
	} else {
		s.col++
	}
	s.i++
}

func (s *posScanner) here() Pos { return Pos{s.line, s.col} }

func (s *posScanner) skipSpace() {
	for c := s.peek(); c == ' ' || c == '\t'; c = s.peek() {
		s.adv()
	}
}

func (s *posScanner) skipComment() {
	for !s.eof() && s.peek() != '\n' {
		s.adv()
	}
}

// skipBlank skips spaces, newlines and comments (inside arrays and inline tables).
func (s *posScanner) skipBlank() {
	for !s.eof() {
		switch s.peek() {
		case ' ', '\t', '\r', '\n':
			s.adv()
		case '#':
			s.skipComment()
		default:
			return
		}
	}
}

func (s *posScanner) record(path string, key, val Pos) {
	if _, ok := s.p.Key[path]; !ok {
		s.p.Key[path] = key
	}
	if _, ok := s.p.Val[path]; !ok {
		s.p.Val[path] = val
	}
}

// define notes that a key or table header writes path at at (array
// elements are values, not definitions).
func (s *posScanner) define(path string, at Pos) {
	s.p.defs = append(s.p.defs, def{path, at})
}

func (s *posScanner) document() {
	for !s.eof() {
		start := s.i
		s.skipSpace()
		switch c := s.peek(); {
		case c == '\r' || c == '\n':
			s.adv()
		case c == '#':
			s.skipComment()
		case c == '[':
			s.header()
		case c == 0:
			return
		default:
			s.keyValue(s.table)
		}
		if s.i == start { // never loop forever on input we do not understand
			s.adv()
		}
	}
}

func (s *posScanner) header() {
	s.adv() // [
	array := s.peek() == '['
	if array {
		s.adv()
	}
	s.skipSpace()
	at := s.here()
	segs := s.key()
	s.skipSpace()
	for s.peek() == ']' {
		s.adv()
	}
	// Resolve the path: a prefix naming an array of tables means its latest element.
	path := ""
	for j, k := range segs {
		path = JoinPath(path, k)
		s.define(path, at)
		n, isArray := s.arrayNext[path]
		switch {
		case j == len(segs)-1 && array:
			if !isArray {
				s.record(path, at, at) // the array as a whole: its first header
			}
			s.arrayNext[path] = n + 1
			path = IndexPath(path, n)
		case isArray && n > 0:
			path = IndexPath(path, n-1)
		}
	}
	s.record(path, at, at)
	s.table = path
}

func (s *posScanner) keyValue(table string) {
	at := s.here()
	segs := s.key()
	if len(segs) == 0 {
		return
	}
	s.skipSpace()
	if s.peek() != '=' {
		s.skipComment() // not a key/value line after all; skip the rest of it
		return
	}
	s.adv()
	s.skipSpace()
	path := table
	for _, k := range segs[:len(segs)-1] {
		path = JoinPath(path, k)
		s.record(path, at, at) // implicit tables of a dotted key
		s.define(path, at)
	}
	path = JoinPath(path, segs[len(segs)-1])
	s.record(path, at, s.here())
	s.define(path, at)
	s.value(path)
}

// key reads a possibly dotted, possibly quoted key.
func (s *posScanner) key() []string {
	var segs []string
	for {
		s.skipSpace()
		switch c := s.peek(); c {
		case '"':
			segs = append(segs, unquoteBasic(s.basicString()))
		case '\'':
			lit := s.literalString()
			segs = append(segs, strings.TrimSuffix(strings.TrimPrefix(lit, "'"), "'"))
		default:
			start := s.i
			for c := s.peek(); c != 0 && !strings.ContainsRune(" \t\r\n.=]#\"'", rune(c)); c = s.peek() {
				s.adv()
			}
			if s.i == start {
				return segs
			}
			segs = append(segs, s.src[start:s.i])
		}
		s.skipSpace()
		if s.peek() != '.' {
			return segs
		}
		s.adv()
	}
}

func (s *posScanner) value(path string) {
	switch c := s.peek(); {
	case c == '"' || c == '\'':
		if s.peekAt(1) == c && s.peekAt(2) == c {
			s.multiline(c)
		} else if c == '"' {
			s.basicString()
		} else {
			s.literalString()
		}
	case c == '[':
		s.adv()
		for n := 0; ; n++ {
			s.skipBlank()
			if s.eof() || s.peek() == ']' {
				s.adv()
				return
			}
			start := s.i
			el := IndexPath(path, n)
			s.record(el, s.here(), s.here())
			s.value(el)
			s.skipBlank()
			if s.peek() == ',' {
				s.adv()
			}
			if s.i == start {
				s.adv()
			}
		}
	case c == '{':
		s.adv()
		for {
			s.skipBlank()
			if s.eof() || s.peek() == '}' {
				s.adv()
				return
			}
			start := s.i
			s.keyValue(path)
			s.skipBlank()
			if s.peek() == ',' {
				s.adv()
			}
			if s.i == start {
				s.adv()
			}
		}
	default: // numbers, booleans, dates
		start := s.i
		for c := s.peek(); c != 0 && !strings.ContainsRune(" \t\r\n,]}#", rune(c)); c = s.peek() {
			s.adv()
			// A local date-time may have a space between date and time.
			if s.i-start == 10 && s.peek() == ' ' && isDigit(s.peekAt(1)) && s.src[start+4] == '-' {
				s.adv()
			}
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// basicString reads "..." and returns it with its quotes.
func (s *posScanner) basicString() string {
	start := s.i
	s.adv()
	for !s.eof() {
		switch s.peek() {
		case '\\':
			s.adv()
			s.adv()
			continue
		case '"':
			s.adv()
			return s.src[start:s.i]
		case '\n':
			return s.src[start:s.i]
		}
		s.adv()
	}
	return s.src[start:s.i]
}

func (s *posScanner) literalString() string {
	start := s.i
	s.adv()
	for !s.eof() && s.peek() != '\'' && s.peek() != '\n' {
		s.adv()
	}
	if s.peek() == '\'' {
		s.adv()
	}
	return s.src[start:s.i]
}

func (s *posScanner) multiline(q byte) {
	s.adv()
	s.adv()
	s.adv()
	for !s.eof() {
		if q == '"' && s.peek() == '\\' {
			s.adv()
			s.adv()
			continue
		}
		if s.peek() == q && s.peekAt(1) == q && s.peekAt(2) == q {
			// Up to two more quotes may belong to the content.
			for n := 0; n < 5 && s.peek() == q; n++ {
				s.adv()
			}
			return
		}
		s.adv()
	}
}

// unquoteBasic decodes a TOML basic string's escapes (a subset of Go's).
func unquoteBasic(q string) string {
	if u, err := strconv.Unquote(q); err == nil {
		return u
	}
	return strings.Trim(q, `"`)
}

// indexRE matches a path's array indices.
var indexRE = regexp.MustCompile(`\[\d+\]`)

// StripIndices is path without its array indices, as the toml package
// names a key: "env.source.script".
func StripIndices(path string) string { return indexRE.ReplaceAllString(path, "") }
