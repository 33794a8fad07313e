package outfile

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/internal/fulldisk"
)

func TestCheckSpace(t *testing.T) {
	dir := t.TempDir()
	saved := freeBytes
	t.Cleanup(func() { freeBytes = saved })
	asked := ""
	freeBytes = func(d string) (int64, error) { asked = d; return 4096, nil }
	for _, tc := range []struct {
		name  string
		dir   string
		need  int64
		asked string
		err   *SpaceError
	}{
		{"room enough", dir, 4096, dir, nil},
		{"full", dir, 4097, dir, &SpaceError{Dir: dir, Free: 4096, Need: 4097}},
		{"a directory to be made: its parent is asked", filepath.Join(dir, "a", "b"), 1 << 20, dir, &SpaceError{Dir: dir, Free: 4096, Need: 1 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSpace(tc.dir, tc.need)
			var se *SpaceError
			errors.As(err, &se)
			if diff := cmp.Diff(tc.err, se); (err != nil) != (se != nil) || diff != "" {
				t.Errorf("CheckSpace(%q, %d) = %v (-want +got):\n%s", tc.dir, tc.need, err, diff)
			}
			if asked != tc.asked {
				t.Errorf("asked the file system of %q, want %q", asked, tc.asked)
			}
		})
	}
	freeBytes = func(string) (int64, error) { return 0, errors.New("statfs: not supported") }
	if err := CheckSpace(dir, 1<<40); err != nil {
		t.Errorf("a file system that cannot tell: %v, want nil", err)
	}
}

// A real full file system: a 64 KiB tmpfs, filled (needs root's mount).
func TestCheckSpaceFullTmpfs(t *testing.T) {
	dir := fulldisk.Mount(t)
	err := CheckSpace(dir, 1)
	var se *SpaceError
	if !errors.As(err, &se) || se.Free != 0 {
		t.Fatalf("CheckSpace on a full tmpfs = %v, want a *SpaceError with 0 free", err)
	}
	if want := "no space left on the file system of " + dir + ": 0 B free, 1 B needed"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}
