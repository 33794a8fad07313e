package mpirun

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/slurm"
)

// maxSlots bounds a host's slot count: far above any node, far below overflow.
const maxSlots = 1 << 20

// Hostfile renders hosts in the hostfile format of flavor f (its mpirun's):
// Open MPI "host slots=N", Hydra and MVAPICH2 "host:N", one host a line; a
// host without slots is its bare name.
func Hostfile(f Flavor, hosts []Host) string {
	r, ok := flavorRows[f]
	if !ok {
		return ""
	}
	return hostfileText(r.mpirun.syntax, hosts, 0)
}

func hostfileText(sx *syntax, hosts []Host, ppn int) string {
	var b strings.Builder
	for _, h := range hosts {
		if n := slotsOf(h, ppn); n > 0 {
			b.WriteString(strings.NewReplacer("{H}", h.Name, "{S}", strconv.Itoa(n)).Replace(sx.line))
		} else {
			b.WriteString(h.Name)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseHostfile reads a hostfile in any of the formats launchers use:
// Open MPI's "host slots=N [max_slots=M]", Hydra's and MVAPICH2's "host:N",
// or a bare "host" a line. "#" starts a comment; blank lines are skipped.
// Hosts are returned in file order, duplicates kept (launchers count a
// repeated host as more slots). Errors name the line.
func ParseHostfile(text string) ([]Host, error) {
	hosts, _, err := parseHostfile(text)
	return hosts, err
}

func parseHostfile(text string) ([]Host, map[lineStyle]bool, error) {
	var hosts []Host
	styles := map[lineStyle]bool{}
	for i, line := range strings.Split(text, "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		h, style, err := parseHostLine(fields)
		if err != nil {
			return nil, nil, fmt.Errorf("hostfile line %d: %w", i+1, err)
		}
		hosts = append(hosts, h)
		styles[style] = true
	}
	if len(hosts) == 0 {
		return nil, nil, fmt.Errorf("hostfile lists no hosts")
	}
	return hosts, styles, nil
}

func parseHostLine(fields []string) (Host, lineStyle, error) {
	h, style, err := parseHostEntry(fields[0])
	if err != nil {
		return h, style, err
	}
	maxS := -1
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return h, style, fmt.Errorf("unexpected %q after host %s: want slots=N or max_slots=N", f, h.Name)
		}
		if style == styleColon {
			return h, style, fmt.Errorf("%q: host %s already has slots in host:N form", f, h.Name)
		}
		n, err := parseSlots(v)
		if err != nil {
			return h, style, fmt.Errorf("%s: %w", k, err)
		}
		switch k {
		case "slots":
			if h.Slots > 0 {
				return h, style, fmt.Errorf("slots given twice for host %s", h.Name)
			}
			h.Slots = n
		case "max_slots", "max-slots":
			if maxS >= 0 {
				return h, style, fmt.Errorf("max_slots given twice for host %s", h.Name)
			}
			maxS = n
		default:
			return h, style, fmt.Errorf("unknown field %q for host %s: want slots=N or max_slots=N", k, h.Name)
		}
		style = styleSlots
	}
	if maxS >= 0 && h.Slots > maxS {
		return h, style, fmt.Errorf("host %s: slots=%d exceeds max_slots=%d", h.Name, h.Slots, maxS)
	}
	return h, style, nil
}

// parseHostEntry reads "host" or "host:N".
func parseHostEntry(s string) (Host, lineStyle, error) {
	name, slots, colon := strings.Cut(s, ":")
	h := Host{Name: name}
	if err := checkHostName(name); err != nil {
		return h, styleBare, err
	}
	if !colon {
		return h, styleBare, nil
	}
	n, err := parseSlots(slots)
	if err != nil {
		return h, styleColon, fmt.Errorf("host %s: %w", name, err)
	}
	h.Slots = n
	return h, styleColon, nil
}

func parseSlots(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxSlots || s[0] == '+' {
		return 0, fmt.Errorf("slot count %q: want an integer from 1 to %d", s, maxSlots)
	}
	return n, nil
}

// ParseHosts reads a --hosts list: "h1,h2", "h1:2,h2:2", or Slurm hostlist
// expressions such as "node[1-4]" or "gpu[01,03]:4,login1". The list is
// split on the commas outside brackets; each entry is a hostlist
// expression, optionally followed by ":N", which gives every host the entry
// expands to N slots ("node[1-2]:2" is node1:2,node2:2).
func ParseHosts(list string) ([]Host, error) {
	var hosts []Host
	for _, item := range splitOutsideBrackets(list) {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("host list %q has an empty entry", list)
		}
		expr, slots, colon := strings.Cut(item, ":")
		n := 0
		if colon {
			var err error
			if n, err = parseSlots(slots); err != nil {
				return nil, fmt.Errorf("host %s: %w", expr, err)
			}
		}
		names := []string{expr}
		if strings.ContainsAny(expr, "[]") {
			// ExpandHostlist would split on blanks as well.
			if strings.ContainsAny(expr, " \t") {
				return nil, fmt.Errorf("host list entry %q: blank inside a hostlist expression", expr)
			}
			var err error
			if names, err = slurm.ExpandHostlist(expr); err != nil {
				return nil, err
			}
		}
		for _, name := range names {
			if err := checkHostName(name); err != nil {
				return nil, err
			}
			hosts = append(hosts, Host{Name: name, Slots: n})
		}
	}
	return hosts, nil
}

// splitOutsideBrackets splits s on the commas that are not inside a
// hostlist's brackets ("a[1,2],b" is "a[1,2]" and "b"). An unbalanced
// bracket is left for ExpandHostlist to report.
func splitOutsideBrackets(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// checkHostName accepts host names and IPv4 addresses: letters, digits, '.',
// '-' and '_', not starting with '-' (which a launcher would read as an
// option).
func checkHostName(name string) error {
	if name == "" {
		return fmt.Errorf("empty host name")
	}
	if name[0] == '-' {
		return fmt.Errorf("host name %q starts with '-'", name)
	}
	if len(name) > 255 {
		return fmt.Errorf("host name %.20q... is longer than 255 bytes", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("host name %q: invalid character %q", name, c)
		}
	}
	return nil
}

// Placement is how hosts reach the launcher: on its command line
// (Spec.Hosts), in the user's own hostfile (Spec.Hostfile), or in a hostfile
// the caller must write first (Generated, then Spec.Hostfile = its path).
type Placement struct {
	Hosts     []Host
	Hostfile  string // the user's hostfile, passed through as is
	Generated string // hostfile text to write; "" when none
	// HostfileSlots: the hostfile's lines carry slot counts; goes to
	// Spec.HostfileSlots.
	HostfileSlots bool
}

// PlaceHosts decides how hosts reach spec's launcher. userFile and
// userText are the user's hostfile and its content when the hosts came from
// one: it is passed through when the launcher reads every line form it uses,
// else rewritten in the launcher's format (an Open MPI "slots=" file given
// to Hydra, say). Hosts a launcher cannot take on its command line (mpirun_rsh,
// or per-host slots for Intel MPI) go to a generated hostfile; srun, which
// reads no hostfile, gets them as a node list. With ranks per node
// (spec.PPN) every host takes that many ranks: a user's hostfile that says
// otherwise is rewritten.
func PlaceHosts(spec Spec, hosts []Host, userFile, userText string) (Placement, error) {
	r, err := spec.row()
	if err != nil {
		return Placement{}, err
	}
	sx := r.syntax
	if len(hosts) == 0 {
		return Placement{}, nil
	}
	if userFile != "" && sx.hostfile != "" {
		_, styles, err := parseHostfile(userText)
		if err != nil {
			return Placement{}, err
		}
		readable := true
		for st := range styles {
			ok := false
			for _, r := range sx.reads {
				ok = ok || r == st
			}
			readable = readable && ok
		}
		if readable && !(spec.PPN > 0 && slotsDiffer(hosts, spec.PPN)) {
			return Placement{Hostfile: userFile, HostfileSlots: styles[styleColon] || styles[styleSlots]}, nil
		}
		return generated(sx, hosts, spec.PPN), nil
	}
	spec.Hosts, spec.Hostfile = hosts, ""
	if NeedsHostfile(spec) {
		return generated(sx, hosts, spec.PPN), nil
	}
	return Placement{Hosts: hosts}, nil
}

func generated(sx *syntax, hosts []Host, ppn int) Placement {
	slots := ppn > 0 || hasSlots(hosts)
	return Placement{Generated: hostfileText(sx, hosts, ppn), HostfileSlots: slots}
}

// slotsDiffer reports whether some host has slots other than ppn.
func slotsDiffer(hosts []Host, ppn int) bool {
	for _, h := range hosts {
		if h.Slots > 0 && h.Slots != ppn {
			return true
		}
	}
	return false
}

// NodesUsed is how many of hosts np ranks occupy when placed in blocks: of
// ppn each when ppn > 0, else of each host's slots; 0 when the launcher
// decides (hosts without slots and no ppn) or the slots run out.
func NodesUsed(hosts []Host, np, ppn int) int {
	if len(hosts) == 0 || np < 1 {
		return 0
	}
	if ppn > 0 {
		return min(len(hosts), (np+ppn-1)/ppn)
	}
	placed := 0
	for i, h := range hosts {
		if h.Slots == 0 {
			return 0
		}
		if placed += h.Slots; placed >= np {
			return i + 1
		}
	}
	return 0
}

// DefaultNP is the rank count implied by hosts and ranks per node: ppn on
// every host, else the hosts' slots when all have some; 0 when unknown.
func DefaultNP(hosts []Host, ppn int) int {
	if len(hosts) == 0 {
		return 0
	}
	if ppn > 0 {
		return ppn * len(hosts)
	}
	n := 0
	for _, h := range hosts {
		if h.Slots == 0 {
			return 0
		}
		n += h.Slots
	}
	return n
}
