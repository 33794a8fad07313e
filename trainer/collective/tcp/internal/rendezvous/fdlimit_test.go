package rendezvous

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/trainer/collective/backend"
)

func TestFilesNeeded(t *testing.T) {
	links := func(n int, ranks ...int) []bool {
		is := make([]bool, n)
		for _, r := range ranks {
			is[r] = true
		}
		return is
	}
	for _, c := range []struct {
		name   string
		o      Options
		isLink []bool
		want   int
	}{
		{"rank 0: every rank joins it, and its listener", Options{Rank: 0, Size: 512}, links(512, 1, 511), 512},
		{"a rank linked to rank 0: listener and links", Options{Rank: 1, Size: 512}, links(512, 0, 2, 3, 5), 5},
		{"a rank not linked to rank 0 keeps it until ready", Options{Rank: 6, Size: 512}, links(512, 5, 7), 4},
		{"a star's rank: rank 0 only", Options{Rank: 6, Size: 512, star: &starSpec{}}, links(512, 0), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.o.filesNeeded(c.isLink); got != c.want {
				t.Errorf("filesNeeded = %d, want %d", got, c.want)
			}
		})
	}
}

func TestFileShortage(t *testing.T) {
	for _, c := range []struct {
		name             string
		rank, size, need int
		inUse            int
		limit            uint64
		want             string // "" for no error
	}{
		{"fits", 0, 512, 512, 10, 1024, ""},
		{"fits exactly", 0, 512, 512, 10, 538, ""},
		{"one short", 0, 512, 512, 10, 537,
			"rendezvous: rank 0 of 512 needs 538 file descriptors (512 for its connections, 10 open already, 16 to spare) but its limit is 537: raise it with `ulimit -n 538` (or more) where the ranks start"},
		{"a small rank under a tiny limit", 7, 64, 9, 40, 32,
			"rendezvous: rank 7 of 64 needs 65 file descriptors (9 for its connections, 40 open already, 16 to spare) but its limit is 32: raise it with `ulimit -n 65` (or more) where the ranks start"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := fileShortage(c.rank, c.size, c.need, c.inUse, c.limit)
			got := ""
			if err != nil {
				got = err.Error()
				var se *backend.SetupError
				if !errors.As(err, &se) {
					t.Errorf("%T, want a *backend.SetupError (exit 2)", err)
				}
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("fileShortage (-want +got):\n%s", diff)
			}
		})
	}
}
