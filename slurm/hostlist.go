package slurm

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Limits. The first three mirror Slurm's own hostlist.c so that whatever
// Slurm refuses is refused here as well; the last two are ours and keep a
// hostile or fuzzed expression such as "n[0-65535]x[0-65535]" from
// allocating gigabytes (Slurm itself would try).
const (
	// maxRangeHosts is Slurm's MAX_RANGE: hosts in one "lo-hi" item.
	maxRangeHosts = 64 * 1024
	// maxPrefixHosts is Slurm's MAX_PREFIX_CNT: hosts in one bracket
	// group that is not the last group of a name.
	maxPrefixHosts = 64 * 1024
	// maxBracketItems is Slurm's MAX_RANGES: comma-separated items in one
	// bracket group (scontrol dies with a fatal error beyond it).
	maxBracketItems = 256 * 1024
	// maxHosts bounds the total number of names one expansion may return.
	maxHosts = 1 << 20
	// maxExpandBytes bounds the total size of those names.
	maxExpandBytes = 1 << 27
)

// HostlistError reports a hostlist expression that cannot be expanded.
type HostlistError struct {
	Expr string // the whole expression as given
	Msg  string // what is wrong with it
}

func (e *HostlistError) Error() string {
	return fmt.Sprintf("invalid hostlist %q: %s", e.Expr, e.Msg)
}

// isSep reports whether c separates names at the top level of a hostlist.
// Slurm splits on comma, space and tab only; a newline is not a separator
// for Slurm (it would end up inside a host name), so it is rejected below.
func isSep(c byte) bool { return c == ',' || c == ' ' || c == '\t' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isControl(c byte) bool { return c < 0x20 || c == 0x7f }

// rangeItem is one "lo" or "lo-hi" item of a bracket group. Every value is
// printed zero-padded to width, which is the length of lo's text, exactly
// as Slurm does ("n[8-010]" gives n8 n9 n10, "n[08-10]" gives n08 n09 n10).
type rangeItem struct {
	lo, hi uint64
	width  int
}

type group struct {
	items []rangeItem
	count uint64 // hosts in the group, <= maxHosts
	width int    // longest formatted value
}

// name is one top-level element: literal text interleaved with bracket
// groups. lits has len(groups)+1 entries; with groups, the last is "".
type name struct {
	lits   []string
	groups []group
}

// ExpandHostlist expands a Slurm hostlist expression such as
// "node[1-3],gpu[08-10],rack[1-2]-n[01-02]" into host names, in Slurm's
// order and keeping duplicates. Names are separated by commas, spaces or
// tabs (runs of them and leading or trailing ones are ignored, as in
// Slurm), so the empty string expands to an empty list without error, as
// `scontrol show hostnames ""` does.
//
// A name may hold several bracket groups, but, as in Slurm, text may not
// follow the last group ("n[1-2]x" is invalid, "r[1-2]-n[1-2]" is fine).
// With several groups Slurm varies the last group fastest, then the first,
// second, ... up to the second to last, which is the slowest:
// "a[1-2]b[3-4]c[5-6]" gives a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 ...
//
// Invalid input yields a *HostlistError. That covers everything scontrol
// rejects plus input scontrol mangles instead of rejecting: an unclosed
// '[', a stray ']', nested '[', whitespace or signs inside brackets,
// control characters, numbers above 2^64-1, and expansions of more than
// 1<<20 hosts or 128 MiB of names.
func ExpandHostlist(expr string) ([]string, error) {
	names, total, err := parseHostlist(expr)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, total)
	for i := range names {
		out = names[i].expand(out)
	}
	return out, nil
}

func parseHostlist(expr string) (names []name, total uint64, err error) {
	fail := func(format string, args ...any) ([]name, uint64, error) {
		return nil, 0, &HostlistError{Expr: expr, Msg: fmt.Sprintf(format, args...)}
	}
	var totalBytes uint64
	i := 0
	for {
		for i < len(expr) && isSep(expr[i]) {
			i++
		}
		if i == len(expr) {
			return names, total, nil
		}
		start := i
		var n name
		lit := i // start of the current literal run
		for i < len(expr) && !isSep(expr[i]) {
			c := expr[i]
			switch {
			case c == '[':
				n.lits = append(n.lits, expr[lit:i])
				end := i + 1
				for end < len(expr) && expr[end] != ']' {
					switch b := expr[end]; {
					case b == '[':
						return fail("nested '[' at offset %d", end)
					case b == ' ' || b == '\t':
						return fail("whitespace inside brackets at offset %d", end)
					case isControl(b):
						return fail("control character %q at offset %d", b, end)
					}
					end++
				}
				if end == len(expr) {
					return fail("'[' at offset %d is never closed", i)
				}
				g, msg := parseGroup(expr[i+1 : end])
				if msg != "" {
					return fail("%s", msg)
				}
				n.groups = append(n.groups, g)
				i = end + 1
				lit = i
				continue
			case c == ']':
				return fail("']' at offset %d has no matching '['", i)
			case isControl(c):
				return fail("control character %q at offset %d", c, i)
			}
			i++
		}
		n.lits = append(n.lits, expr[lit:i])
		if len(n.groups) > 0 && n.lits[len(n.lits)-1] != "" {
			return fail("text %q follows the last bracket group of %q (Slurm allows text only between groups)",
				n.lits[len(n.lits)-1], expr[start:i])
		}
		for k := 0; k+1 < len(n.groups); k++ {
			if n.groups[k].count > maxPrefixHosts {
				return fail("bracket group %d of %q has %d hosts, Slurm allows at most %d in a group that is not the last",
					k+1, expr[start:i], n.groups[k].count, maxPrefixHosts)
			}
		}
		count, length := n.size()
		if count > maxHosts-total {
			return fail("expands to more than %d hosts", maxHosts)
		}
		total += count
		hi, lo := bits.Mul64(count, length)
		if hi != 0 || lo > maxExpandBytes-totalBytes {
			return fail("expands to more than %d bytes of host names", maxExpandBytes)
		}
		totalBytes += lo
		names = append(names, n)
	}
}

// parseGroup parses the text between '[' and ']'. It returns a non-empty
// message when the text is invalid.
func parseGroup(s string) (group, string) {
	var g group
	if s == "" {
		return g, "empty brackets []"
	}
	for item := range strings.SplitSeq(s, ",") {
		if len(g.items) == maxBracketItems {
			return g, fmt.Sprintf("more than %d items in [%s]", maxBracketItems, s)
		}
		if item == "" {
			return g, fmt.Sprintf("empty item in [%s]", s)
		}
		loText, hiText, isRange := strings.Cut(item, "-")
		lo, msg := parseBound(loText, item)
		if msg != "" {
			return g, msg
		}
		hi := lo
		if isRange {
			if hi, msg = parseBound(hiText, item); msg != "" {
				return g, msg
			}
		}
		if lo > hi {
			return g, fmt.Sprintf("reversed range %s", item)
		}
		if hi-lo >= maxRangeHosts {
			return g, fmt.Sprintf("range %s has more than %d hosts", item, maxRangeHosts)
		}
		g.items = append(g.items, rangeItem{lo: lo, hi: hi, width: len(loText)})
		g.count += hi - lo + 1
		if g.count > maxHosts {
			return g, fmt.Sprintf("[%s] has more than %d hosts", s, maxHosts)
		}
		g.width = max(g.width, len(loText), numLen(hi))
	}
	return g, ""
}

func parseBound(text, item string) (uint64, string) {
	if text == "" {
		return 0, fmt.Sprintf("range %q is missing a number", item)
	}
	for i := 0; i < len(text); i++ {
		if !isDigit(text[i]) {
			return 0, fmt.Sprintf("non-numeric range %q", item)
		}
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, fmt.Sprintf("number %s in %q is too large", text, item)
	}
	return v, ""
}

func numLen(v uint64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// size returns how many hosts n expands to and an upper bound on the
// length of each. Callers have bounded every group's count by maxHosts.
func (n *name) size() (count, length uint64) {
	count = 1
	for _, l := range n.lits {
		length += uint64(len(l))
	}
	for _, g := range n.groups {
		hi, lo := bits.Mul64(count, g.count)
		if hi != 0 || lo > maxHosts {
			return math.MaxUint64, length
		}
		count = lo
		length += uint64(g.width)
	}
	return count, length
}

// cursor walks the values of one group in order.
type cursor struct {
	item int
	val  uint64
}

// expand appends n's hosts to out in Slurm's order.
func (n *name) expand(out []string) []string {
	k := len(n.groups)
	if k == 0 {
		return append(out, n.lits[0])
	}
	// order lists the groups from the slowest-varying to the fastest:
	// k-2, k-3, ..., 0, k-1. This is what Slurm's recursive
	// _push_range_list produces.
	order := make([]int, 0, k)
	for g := k - 2; g >= 0; g-- {
		order = append(order, g)
	}
	order = append(order, k-1)

	cur := make([]cursor, k)
	for g := range cur {
		cur[g].val = n.groups[g].items[0].lo
	}
	var buf []byte
	for {
		buf = buf[:0]
		for g := range k {
			buf = append(buf, n.lits[g]...)
			it := n.groups[g].items[cur[g].item]
			buf = appendPadded(buf, cur[g].val, it.width)
		}
		out = append(out, string(buf))

		level := len(order) - 1
		for ; level >= 0; level-- {
			g := order[level]
			c := &cur[g]
			items := n.groups[g].items
			if c.val < items[c.item].hi {
				c.val++
				break
			}
			if c.item+1 < len(items) {
				c.item++
				c.val = items[c.item].lo
				break
			}
			c.item, c.val = 0, items[0].lo
		}
		if level < 0 {
			return out
		}
	}
}

// appendPadded appends v in decimal, zero-padded to width (Slurm's %0*lu).
func appendPadded(buf []byte, v uint64, width int) []byte {
	for n := numLen(v); n < width; n++ {
		buf = append(buf, '0')
	}
	return strconv.AppendUint(buf, v, 10)
}

// hostRange is a run of hosts prefix<lo>..prefix<hi>, or a single host
// without a numeric suffix (single).
type hostRange struct {
	prefix string
	lo, hi uint64
	width  int
	single bool
}

// CompressHostlist returns a compact hostlist expression for hosts, the
// inverse of ExpandHostlist and the equivalent of `scontrol show hostlist`:
// consecutive hosts with the same prefix and ascending numbers become
// ranges, consecutive ranges with the same prefix share one bracket group,
// and nothing is sorted or deduplicated, so "n3,n1,n2" becomes "n[3,1-2]"
// and order and duplicates survive the round trip. Zero padding is kept
// ("n[08-10]", "n[9,010]").
//
// ExpandHostlist(CompressHostlist(hosts)) returns hosts for every list of
// valid host names (what ExpandHostlist can return: non-empty, with no
// comma, space, tab, bracket or control character) within ExpandHostlist's
// limits (1<<20 names, 128 MiB).
// Invalid names are copied to the output as they are and will not survive.
//
// The output is the same string scontrol prints, except that a range or
// bracket group is split where Slurm's parser would refuse to read it back
// (more than 65536 hosts in a range, more than 262144 items in a group).
func CompressHostlist(hosts []string) string {
	var ranges []hostRange
	for _, h := range hosts {
		r := splitHost(h)
		if len(ranges) > 0 {
			t := &ranges[len(ranges)-1]
			if !t.single && !r.single && t.prefix == r.prefix &&
				t.hi != math.MaxUint64 && t.hi+1 == r.lo &&
				t.hi-t.lo+1 < maxRangeHosts &&
				widthEquiv(t.lo, &t.width, r.lo, &r.width) {
				t.hi = r.lo
				continue
			}
		}
		ranges = append(ranges, r)
	}

	var b strings.Builder
	for i := 0; i < len(ranges); {
		if i > 0 {
			b.WriteByte(',')
		}
		first := ranges[i]
		end := i + 1
		for end < len(ranges) && end-i < maxBracketItems && sameBracket(ranges[end-1], ranges[end]) {
			end++
		}
		b.WriteString(first.prefix)
		if first.single {
			i = end
			continue
		}
		bracket := end-i > 1 || first.hi > first.lo
		if bracket {
			b.WriteByte('[')
		}
		for j := i; j < end; j++ {
			if j > i {
				b.WriteByte(',')
			}
			r := ranges[j]
			b.Write(appendPadded(nil, r.lo, r.width))
			if r.hi > r.lo {
				b.WriteByte('-')
				b.Write(appendPadded(nil, r.hi, r.width))
			}
		}
		if bracket {
			b.WriteByte(']')
		}
		i = end
	}
	return b.String()
}

func sameBracket(a, b hostRange) bool {
	return !a.single && !b.single && a.prefix == b.prefix
}

// splitHost splits h into a prefix and a numeric suffix the way Slurm's
// hostname_create does. A suffix too large for 64 bits (which Slurm would
// silently clamp) makes the whole name a single host instead.
func splitHost(h string) hostRange {
	i := len(h)
	for i > 0 && isDigit(h[i-1]) {
		i--
	}
	if i == len(h) {
		return hostRange{prefix: h, single: true}
	}
	v, err := strconv.ParseUint(h[i:], 10, 64)
	if err != nil {
		return hostRange{prefix: h, single: true}
	}
	return hostRange{prefix: h[:i], lo: v, hi: v, width: len(h) - i}
}

// zeroPadded returns how many zeros pad num to width.
func zeroPadded(num uint64, width int) int {
	return max(width-numLen(num), 0)
}

// widthEquiv is Slurm's _width_equiv: whether ranges starting at n and m
// with widths *wn and *wm can share one width without changing how any of
// their values print; if so it makes the widths equal the way Slurm does.
func widthEquiv(n uint64, wn *int, m uint64, wm *int) bool {
	if *wn == *wm {
		return true
	}
	npad, nmpad := zeroPadded(n, *wn), zeroPadded(n, *wm)
	mpad, mnpad := zeroPadded(m, *wm), zeroPadded(m, *wn)
	switch {
	case npad != nmpad && mpad != mnpad:
		return false
	case npad != nmpad:
		*wm = *wn
	default:
		*wn = *wm
	}
	return true
}
