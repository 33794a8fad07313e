package profile

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/go-multierror"

	"github.com/batchkit/batchkit/profile/internal/tomlpos"
)

// Problem is one thing wrong with a profile, at a place in a file (or on the
// command line). Its Error is "FILE:LINE:COL: message", or "SOURCE: message"
// when there is no line.
type Problem struct {
	File      string // a path, "embedded:NAME.toml", or a source such as "command line"
	Line, Col int    // 1-based; 0 when the problem has no place in a file
	Msg       string
}

func (p *Problem) Error() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Col, p.Msg)
	}
	return fmt.Sprintf("%s: %s", p.File, p.Msg)
}

// Problems returns the problems in err, each on its own: the errors of a
// *multierror.Error returned by this package, or err alone.
func Problems(err error) []error {
	if err == nil {
		return nil
	}
	var me *multierror.Error
	if errors.As(err, &me) {
		return me.WrappedErrors()
	}
	return []error{err}
}

// Said remembers the problems already reported, by their text. Profiles
// checked together that extend one base would each repeat the base's
// problems: with Said they are said once.
type Said map[string]bool

// Fresh returns the problems in err not said before, in order, and marks
// them said.
func (s Said) Fresh(err error) []error {
	var out []error
	for _, e := range Problems(err) {
		if k := e.Error(); !s[k] {
			s[k] = true
			out = append(out, e)
		}
	}
	return out
}

// problems collects Problems and returns them as one *multierror.Error whose
// message lists one problem a line.
type problems []*Problem

func (ps *problems) add(file string, at tomlpos.Pos, format string, a ...any) {
	*ps = append(*ps, &Problem{File: file, Line: at.Line, Col: at.Col, Msg: fmt.Sprintf(format, a...)})
}

// sorted orders problems by file (in the order files were met), then line
// and column.
func (ps problems) sorted() problems {
	out := append(problems(nil), ps...)
	order := map[string]int{}
	for _, p := range out {
		if _, ok := order[p.File]; !ok {
			order[p.File] = len(order)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if order[a.File] != order[b.File] {
			return order[a.File] < order[b.File]
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return out
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	me := &multierror.Error{ErrorFormat: listFormat}
	seen := map[string]bool{}
	for _, p := range ps {
		if s := p.Error(); !seen[s] {
			seen[s] = true
			me.Errors = append(me.Errors, p)
		}
	}
	return me
}

// listFormat puts each problem on its own line, without multierror's
// "N errors occurred" header and bullets.
func listFormat(errs []error) string {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// suggest returns the candidate closest to name, or "" when none is close
// enough to be a plausible misspelling.
func suggest(name string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if strings.EqualFold(c, name) {
			return c
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	limit := len([]rune(name)) / 3
	if limit < 1 {
		limit = 1
	}
	if limit > 3 {
		limit = 3
	}
	if bestD <= limit {
		return best
	}
	return ""
}

// editDistance is the optimal-string-alignment distance: Levenshtein's
// insertions, deletions and substitutions, plus swaps of adjacent letters
// ("qso" is one edit from "qos").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
