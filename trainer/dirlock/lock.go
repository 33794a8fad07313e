// Package dirlock keeps one run at a time in a directory: an flock(2) on a
// lock file in it (FileName) that names the run holding it (Owner), taken
// over from a run that died holding it, and checked again before each write
// (Check) so a run whose lock another took stops (*LostError). Its one user
// is the trainer's checkpoint directory, which its messages name (and the
// flag --checkpoint-dir). What the directory holds is the caller's: the
// trainer removes its own temporary files once it holds the lock.
package dirlock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/batchkit/batchkit/internal/outfile"
)

// FileName is the file in a directory that says which run uses it. The run
// holds an flock(2) on it from Acquire until Unlock, and its content names
// the run (Owner, one JSON line). The kernel drops the flock when the
// process dies, however it dies: a lock file whose flock is free was left
// by a run that ended without removing it (SIGKILL, a node lost), and the
// next run takes it over.
const FileName = ".batchkit.lock"

// Lock is a directory's lock, held (Acquire).
type Lock struct {
	dir, path string
	f         *os.File
	fi        os.FileInfo // of the lock file, for os.SameFile
	content   []byte
	owner     Owner
	flocked   bool   // false: the file system does not lock; the content alone marks the directory
	dead      *Owner // DeadHolder
	warn      func(error)
}

// flock is flock(2), a variable for tests of file systems without locks.
var flock = func(fd int, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// noLocks is flock's answer on a file system that does not lock (NFS
// without a lock manager, Lustre mounted without flock).
func noLocks(err error) bool {
	return errors.Is(err, syscall.ENOLCK) || errors.Is(err, syscall.EOPNOTSUPP) ||
		errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EINVAL)
}

// maxLockBytes is as much of a lock file as is read: an owner is ~150 bytes.
const maxLockBytes = 4096

// Acquire creates dir if missing and locks it for owner: the lock file's
// flock, then owner written into it. A directory locked by a live run is a
// *LockedError naming it; a lock file the kernel no longer locks was left
// by a run that died, and is taken over, reported through warn
// (DeadHolder names it). On a file system that does not lock, warn says so
// and the lock file's content alone is checked. Unlock releases the lock.
func Acquire(dir string, owner Owner, warn func(error)) (*Lock, error) {
	if warn == nil {
		warn = func(error) {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, &UnusableError{Dir: dir, Err: err}
	}
	content, err := json.Marshal(owner)
	if err != nil {
		return nil, err
	}
	l := &Lock{dir: dir, path: filepath.Join(dir, FileName), owner: owner, content: append(content, '\n'), warn: warn}
	prev, err := l.acquire()
	if err != nil {
		return nil, err
	}
	if !l.flocked {
		warn(fmt.Errorf("checkpoint directory %s: this file system does not support locks (flock): a second run on it is refused only while this run's lock file is there", dir))
		if o := parseOwner(prev); o != nil && !l.deadHere(o) {
			l.f.Close()
			return nil, &LockedError{Dir: dir, Holder: o, Unsure: true}
		}
	}
	l.reportTakeover(prev)
	if err := l.write(); err != nil {
		os.Remove(l.path) // held, and empty or half-written (a full disk): junk to the next run
		l.f.Close()
		return nil, &UnusableError{Dir: dir, Err: err}
	}
	if l.flocked {
		l.dead = parseOwner(prev)
	}
	return l, nil
}

// DeadHolder is the run whose lock file Acquire took over with its flock
// free, so known to have ended; nil if there was none, or the file system
// does not lock (where a holder's end is only presumed).
func (l *Lock) DeadHolder() *Owner { return l.dead }

// acquire opens and flocks the lock file, the one at l.path when it is
// locked (a run that unlocks removes it: an flock got on a removed file is
// let go and the new file tried). It returns the file's previous content.
func (l *Lock) acquire() ([]byte, error) {
	for range 50 {
		f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
		switch {
		case errors.Is(err, syscall.ELOOP):
			return nil, &UnusableError{Dir: l.dir, Err: fmt.Errorf("%s is a symbolic link (not followed): remove it", l.path)}
		case errors.Is(err, syscall.EISDIR):
			return nil, &UnusableError{Dir: l.dir, Err: fmt.Errorf("%s is a directory: remove it", l.path)}
		case err != nil:
			return nil, &UnusableError{Dir: l.dir, Err: err}
		}
		fi, err := f.Stat()
		if err == nil && !fi.Mode().IsRegular() {
			err = fmt.Errorf("%s is %s, not a regular file: remove it", l.path, outfile.KindOf(fi.Mode()))
		}
		if err != nil {
			f.Close()
			return nil, &UnusableError{Dir: l.dir, Err: err}
		}
		err = flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case errors.Is(err, syscall.EWOULDBLOCK):
			holder := readHolder(f, l.owner.Host)
			f.Close()
			same := holder != nil && holder.JobID != "" && holder.JobID == l.owner.JobID
			return nil, &LockedError{Dir: l.dir, Holder: holder, SameJob: same}
		case err != nil && !noLocks(err):
			f.Close()
			return nil, &UnusableError{Dir: l.dir, Err: fmt.Errorf("flock %s: %w", l.path, err)}
		}
		l.flocked = err == nil
		if at, err := os.Lstat(l.path); err != nil || !os.SameFile(at, fi) {
			f.Close() // unlocked and removed, or replaced, since it was opened
			continue
		}
		b := make([]byte, maxLockBytes)
		n, _ := f.ReadAt(b, 0)
		l.f, l.fi = f, fi
		return b[:n], nil
	}
	return nil, &UnusableError{Dir: l.dir, Err: fmt.Errorf("%s keeps being removed and created again", l.path)}
}

// readHolder reads the owner in the lock file of another run, which may
// not have written it yet: an incomplete line, or the name of a process of
// this host (host) that no longer runs (the dead run it is taking over), is
// read again for up to a second.
func readHolder(f *os.File, host string) *Owner {
	b := make([]byte, maxLockBytes)
	var o *Owner
	for range 100 {
		n, _ := f.ReadAt(b, 0)
		if o = parseOwner(b[:n]); o != nil && (o.Host != host || Alive(o.PID)) {
			return o
		}
		time.Sleep(10 * time.Millisecond)
	}
	return o
}

// parseOwner is the owner a lock file's content names, or nil.
func parseOwner(b []byte) *Owner {
	line, ok := bytes.CutSuffix(b, []byte("\n"))
	if !ok || bytes.ContainsRune(line, '\n') {
		return nil
	}
	var o Owner // fields a later version may add are ignored
	if json.Unmarshal(line, &o) != nil || o.Host == "" || o.PID <= 0 {
		return nil
	}
	return &o
}

// deadHere reports whether o is a process of this host that no longer runs.
func (l *Lock) deadHere(o *Owner) bool {
	return o.Host == l.owner.Host && !Alive(o.PID)
}

// Alive reports whether pid is a process here (another user's too): the
// rule by which a holder of this host is dead, for the caller's own
// files of dead writers too.
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// reportTakeover tells of the lock file a dead run left, if any.
func (l *Lock) reportTakeover(prev []byte) {
	if len(bytes.TrimSpace(prev)) == 0 {
		return
	}
	o := parseOwner(prev)
	if o == nil {
		l.warn(fmt.Errorf("checkpoint directory %s: its lock file %s held no run's name (junk?) and no lock: taken over", l.dir, l.path))
		return
	}
	msg := fmt.Sprintf("checkpoint directory %s: took over the lock of %s, which ended without releasing it", l.dir, o)
	if o.Host != l.owner.Host {
		msg += fmt.Sprintf(" (%s is another host, whose processes cannot be seen from here: should that run still be running, it stops at its next checkpoint)", o.Host)
	}
	l.warn(errors.New(msg))
}

// write puts the owner into the lock file.
func (l *Lock) write() error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	if _, err := l.f.WriteAt(l.content, 0); err != nil {
		return err
	}
	return l.f.Sync()
}

// held reports whether the file at l.path is l's lock file and names l's
// owner; if it is l's file but not l's content, what it holds; if another
// file or none is there, ok and same are false.
func (l *Lock) held() (ok, same bool, content []byte, err error) {
	fi, err := os.Lstat(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil, nil
	}
	if err != nil {
		return false, false, nil, err
	}
	if !os.SameFile(fi, l.fi) {
		return false, false, nil, nil
	}
	b := make([]byte, maxLockBytes)
	n, err := l.f.ReadAt(b, 0)
	if n == 0 && err != nil && !errors.Is(err, io.EOF) {
		return false, true, nil, err
	}
	return bytes.Equal(b[:n], l.content), true, b[:n], nil
}

// Check, before every checkpoint, is that the lock is still this run's. A
// lock file that names another run is a *LostError; one removed or
// replaced by hand is locked again (if nobody holds it), one overwritten
// with junk written again, each reported.
func (l *Lock) Check() error {
	ok, same, content, err := l.held()
	switch {
	case err != nil || ok:
		return err
	case same:
		if o := parseOwner(content); o != nil {
			return &LostError{Dir: l.dir, Holder: o} // flock did not keep it out
		}
		l.warn(fmt.Errorf("checkpoint directory %s: its lock file %s was overwritten while this run held it: written again", l.dir, l.path))
		return l.write()
	}
	again := &Lock{dir: l.dir, path: l.path, owner: l.owner, content: l.content, warn: l.warn}
	prev, err := again.acquire()
	var le *LockedError
	if errors.As(err, &le) {
		return &LostError{Dir: l.dir, Holder: le.Holder}
	}
	if err != nil {
		return err
	}
	if o := parseOwner(prev); o != nil && !again.flocked {
		again.f.Close()
		return &LostError{Dir: l.dir, Holder: o}
	}
	if err := again.write(); err != nil {
		again.f.Close()
		return err
	}
	l.warn(fmt.Errorf("checkpoint directory %s: its lock file %s was removed or replaced while this run held it: locked again", l.dir, l.path))
	l.f.Close()
	l.f, l.fi, l.flocked = again.f, again.fi, again.flocked
	return nil
}

// Unlock releases the lock: the lock file is removed if it is still this
// run's, then its flock let go. It may be called more than once.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	var err error
	if ok, _, _, _ := l.held(); ok {
		if err = os.Remove(l.path); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}
