package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/batchkit/batchkit/internal/bytesize"
)

// SpaceError is a destination whose file system has less room than what is
// to be written there: a full disk found before the work whose result
// would be lost, not after.
type SpaceError struct {
	Dir        string // the directory written in (or its nearest existing parent)
	Free, Need int64
}

func (e *SpaceError) Error() string {
	return fmt.Sprintf("no space left on the file system of %s: %s free, %s needed", e.Dir, bytesize.Format(e.Free), bytesize.Format(e.Need))
}

// freeBytes is what the file system of dir has free for this process:
// the blocks root may use when it is root (ext4 keeps 5 % for it), the
// others' otherwise. A variable for tests.
var freeBytes = func(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	blocks := st.Bavail
	if os.Geteuid() == 0 {
		blocks = st.Bfree
	}
	return int64(blocks) * st.Bsize, nil
}

// CheckSpace refuses, with a *SpaceError, a directory whose file system has
// fewer than need bytes free; dir need not exist yet (its nearest existing
// parent is asked). A file system that cannot tell is not refused: the
// writes themselves will say.
func CheckSpace(dir string, need int64) error {
	at := existingParent(dir)
	free, err := freeBytes(at)
	if err != nil || free >= need {
		return nil
	}
	return &SpaceError{Dir: at, Free: free, Need: need}
}

// existingParent is dir, or its nearest parent that exists.
func existingParent(dir string) string {
	dir = filepath.Clean(dir)
	for {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return dir
		}
		dir = up
	}
}
