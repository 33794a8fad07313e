// Package bytesize writes byte counts for people, the one way batchkit
// does: bench's message sizes, a node's memory, a disk's free space.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Format is a byte count for people: "8 B", "1 KiB", "1.5 KiB", "64 MiB"
// (at most two decimals).
func Format(b int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	u := 0
	for u < len(units)-1 && b>>(10*(u+1)) > 0 {
		u++
	}
	if b%(int64(1)<<(10*u)) == 0 {
		return fmt.Sprintf("%d %s", b>>(10*u), units[u])
	}
	s := strconv.FormatFloat(float64(b)/float64(int64(1)<<(10*u)), 'f', 2, 64)
	return strings.TrimRight(strings.TrimRight(s, "0"), ".") + " " + units[u]
}
