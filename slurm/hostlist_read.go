package slurm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// maxHostlistLine bounds one line of ReadHostlist's input: a comma-separated
// list of 1<<20 short names still fits, and /dev/zero or a binary file does
// not eat memory before it is refused.
const maxHostlistLine = 16 << 20

// ReadHostlist reads host names, or host list expressions, from r the way
// `scontrol show hostnames` prints them and its users pipe them: one a line,
// or comma- or blank-separated on one line, each line expanded with
// ExpandHostlist (so "n[1-3,5]" stays one expression). name names r in errors
// ("standard input"). It stops at maxHosts names, as one expansion does.
func ReadHostlist(r io.Reader, name string) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxHostlistLine)
	var hosts []string
	for line := 1; sc.Scan(); line++ {
		hs, err := ExpandHostlist(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, line, err)
		}
		if len(hs) > maxHosts-len(hosts) {
			return nil, fmt.Errorf("%s: more than %d hosts", name, maxHosts)
		}
		hosts = append(hosts, hs...)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s: a line longer than %d bytes: not a host list", name, maxHostlistLine)
		}
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return hosts, nil
}
