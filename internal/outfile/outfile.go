// Package outfile writes the files batchkit makes for a user (plots, batch
// scripts) without losing what was there: a new file is created exclusively,
// an existing one is replaced only when asked, and then whole; a log is
// appended to (Append), never truncated. Only regular
// files are written: a device, FIFO, socket or directory at the path (or at
// the end of a symbolic link) is refused and left alone, since replacing
// /dev/null with a file, as root, breaks the system.
package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// NotRegularError is a path Write refuses because it is not a regular file
// nor a symbolic link to one. Kind says what it is ("a FIFO", "a symbolic
// link to a character device"); Err is why a link could not be followed, if
// that is the reason.
type NotRegularError struct {
	Path string
	Kind string
	Err  error
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s: is %s, not a regular file", e.Path, e.Kind)
}

func (e *NotRegularError) Unwrap() error { return e.Err }

// OwnerError is an existing file Write will not replace because the new file
// could not be given the old one's owner (a user replacing someone else's
// file): silently making it the user's would be a surprise for the owner.
type OwnerError struct {
	Path     string
	UID, GID uint32
	Err      error // from chown; satisfies errors.Is(err, fs.ErrPermission)
}

func (e *OwnerError) Error() string {
	return fmt.Sprintf("%s: owned by uid %d gid %d; not replaced, as the new file could not keep that owner (%v)", e.Path, e.UID, e.GID, e.Err)
}

func (e *OwnerError) Unwrap() error { return e.Err }

// Write writes data to path. Without replace an existing file is refused (an
// error satisfying errors.Is(err, fs.ErrExist)) and left as it was. With
// replace the data goes to a temporary file in the same directory, synced,
// then renamed over the file: the old one is never truncated first, never
// seen half-written, and its permission bits and owner are kept. A new file
// gets mode perm. A symbolic link to a regular file is written through, as
// the shell's > does: its target is replaced, the link stays. Anything else
// that is not a regular file is refused, replace or not, with a
// *NotRegularError. Errors name path, not the temporary file or a target.
func Write(path string, data []byte, perm fs.FileMode, replace bool) error {
	if !replace {
		return create(path, data, perm)
	}
	target, old, err := resolve(path)
	if err != nil {
		return err
	}
	return replaceFile(path, target, old, data, perm)
}

// Check is Write's refusal without the write: nil when path is missing, a
// regular file or a link to one; a *NotRegularError when it is anything else;
// another error when it cannot be looked at. For refusing before work that
// would be wasted.
func Check(path string) error {
	_, _, err := resolve(path)
	return err
}

// Append opens path for appending, creating it with mode perm if missing:
// for a log a run continues. It never truncates, and never blocks: what is
// not a regular file (after links) is refused with a *NotRegularError before
// it is opened, and the open is non-blocking and checked again on the open
// file, so that a FIFO swapped in meanwhile is refused (or fails with ENXIO)
// instead of hanging the open until a reader comes.
func Append(path string, perm fs.FileMode) (*os.File, error) {
	if _, _, err := resolve(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &NotRegularError{Path: path, Kind: KindOf(fi.Mode())}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// create makes a new file. O_EXCL refuses every existing name, a dangling
// link included; the refusal is then made to say what is there, since
// "exists, use --force" would be wrong advice for a FIFO.
func create(path string, data []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrExist) {
		var nre *NotRegularError
		if _, _, cerr := resolve(path); errors.As(cerr, &nre) {
			return cerr
		}
		return err
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path) // ours: created just now
	}
	return err
}

// resolve finds the file a write to path lands in: path itself, or the end
// of the symbolic links it names. old is that file's info, nil if there is
// none yet; anything but a regular file is a *NotRegularError.
func resolve(path string) (target string, old fs.FileInfo, err error) {
	li, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	if li.Mode()&fs.ModeSymlink == 0 {
		if kind := classify(li.Mode(), 0, nil); kind != "" {
			return "", nil, &NotRegularError{Path: path, Kind: kind}
		}
		return path, li, nil
	}
	fi, serr := os.Stat(path)
	var mode fs.FileMode
	if serr == nil {
		mode = fi.Mode()
	}
	if kind := classify(li.Mode(), mode, serr); kind != "" {
		return "", nil, &NotRegularError{Path: path, Kind: kind, Err: serr}
	}
	if serr != nil {
		return "", nil, serr // e.g. no permission to look: not ours to guess
	}
	if target, err = filepath.EvalSymlinks(path); err != nil {
		return "", nil, err
	}
	return target, fi, nil
}

// classify says what a destination is when it is not a regular file, ""
// when it is one. lmode is lstat's mode of the path; for a symbolic link,
// tmode and terr are stat's result for what it points to. Pure, so every
// case is a table row.
func classify(lmode, tmode fs.FileMode, terr error) string {
	if lmode&fs.ModeSymlink == 0 {
		return KindOf(lmode)
	}
	switch {
	case errors.Is(terr, syscall.ELOOP):
		return "a symbolic link loop"
	case errors.Is(terr, fs.ErrNotExist), errors.Is(terr, syscall.ENOTDIR):
		return "a dangling symbolic link"
	case terr != nil:
		return "" // not a kind: the caller returns terr
	}
	if kind := KindOf(tmode); kind != "" {
		return "a symbolic link to " + kind
	}
	return ""
}

// KindOf names a mode's file type for a message ("a FIFO"), "" for a
// regular file.
func KindOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return ""
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "an irregular file"
}

// replaceFile writes data to a temporary file next to target and renames it
// over target. old (nil for a new file) gives the mode and owner to keep.
func replaceFile(path, target string, old fs.FileInfo, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		return asPath(err, path)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	_, err = tmp.Write(data)
	if err == nil {
		err = keepOwner(tmp, path, old)
	}
	if err == nil {
		err = tmp.Chmod(modeFor(old, perm)) // CreateTemp makes it 0600
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unchanged(path, target, old)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), target)
	}
	return asPath(err, path)
}

// modeFor is the new file's mode: the old file's permission bits, or perm
// for a new file. Set-id bits are not carried over, as the kernel clears
// them when a non-root user writes a file.
func modeFor(old fs.FileInfo, perm fs.FileMode) fs.FileMode {
	if old == nil {
		return perm
	}
	return old.Mode().Perm()
}

// keepOwner gives the temporary file old's owner and group, or refuses
// with an *OwnerError when that is not permitted.
func keepOwner(tmp *os.File, path string, old fs.FileInfo) error {
	if old == nil {
		return nil
	}
	want, ok := old.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	fi, err := tmp.Stat()
	if err != nil {
		return err
	}
	if have, ok := fi.Sys().(*syscall.Stat_t); ok && have.Uid == want.Uid && have.Gid == want.Gid {
		return nil
	}
	if err := tmp.Chown(int(want.Uid), int(want.Gid)); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // it names the temporary file
		}
		return &OwnerError{Path: path, UID: want.Uid, GID: want.Gid, Err: err}
	}
	return nil
}

// unchanged checks, just before the rename, that target is still what
// resolve found: the rename replaces whatever name is there, so a FIFO or
// device swapped in meanwhile must not be the one replaced. This narrows
// the race to the rename itself; it cannot close it.
func unchanged(path, target string, old fs.FileInfo) error {
	now, err := os.Lstat(target)
	switch {
	case old == nil && errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case old != nil && os.SameFile(old, now):
		return nil
	}
	if kind := KindOf(now.Mode()); kind != "" {
		return &NotRegularError{Path: path, Kind: kind}
	}
	return fmt.Errorf("%s: replaced by another file while being written; left as it is", path)
}

// asPath makes an error about the temporary file one about path. Only the
// os package's own errors: the typed ones above already name path, and must
// stay what they are.
func asPath(err error, path string) error {
	switch e := err.(type) {
	case *fs.PathError:
		return &fs.PathError{Op: e.Op, Path: path, Err: e.Err}
	case *os.LinkError:
		return &fs.PathError{Op: e.Op, Path: path, Err: e.Err}
	}
	return err
}
