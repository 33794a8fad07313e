// Package outfile writes the files batchkit makes for a user (plots, batch
// scripts) without losing what was there: a new file is created exclusively,
// an existing one is replaced only when asked, and then whole.
package outfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes data to path with mode perm. Without replace an existing file
// is refused (an error satisfying errors.Is(err, fs.ErrExist)) and left as it
// was. With replace the data goes to a temporary file next to path, which is
// renamed over it once complete: the old file is never truncated first, and
// never seen half-written. Errors name path, not the temporary file.
func Write(path string, data []byte, perm fs.FileMode, replace bool) error {
	if !replace {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path) // ours: created just now
		}
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return asPath(err, path)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), perm) // CreateTemp makes it 0600
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	return asPath(err, path)
}

// asPath makes an error about the temporary file one about path.
func asPath(err error, path string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: path, Err: pe.Err}
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return &fs.PathError{Op: le.Op, Path: path, Err: le.Err}
	}
	return err
}
