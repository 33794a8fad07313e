package trainer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batchkit/batchkit/internal/outfile"
)

// LockFileName is the file in a checkpoint directory that says which run
// uses it. The run holds an flock(2) on it from before it resumes until it
// returns, and its content names the run (LockOwner, one JSON line). The
// kernel drops the flock when the process dies, however it dies: a lock
// file whose flock is free was left by a run that ended without removing
// it (SIGKILL, a node lost), and the next run takes it over.
const LockFileName = ".batchkit.lock"

// LockOwner is the run that holds a checkpoint directory.
type LockOwner struct {
	Host  string    `json:"host"`
	PID   int       `json:"pid"`
	JobID string    `json:"job_id,omitempty"`
	Since time.Time `json:"since"`
}

func (o LockOwner) String() string {
	s := fmt.Sprintf("host %s pid %d", o.Host, o.PID)
	if o.JobID != "" {
		s += fmt.Sprintf(" (job %s)", o.JobID)
	}
	if !o.Since.IsZero() {
		s += " since " + o.Since.Format(time.RFC3339)
	}
	return s
}

// LockedError is a checkpoint directory in use by another run: a second
// run is refused before its first step.
type LockedError struct {
	Dir    string
	Holder *LockOwner // nil: the lock file names no run (being written, or junk)
	// Unsure: the file system does not lock, so whether Holder still runs
	// is not known (a run on another host, or a PID that runs here).
	Unsure bool
	// Peer: this rank is not rank 0, which found the directory in use.
	Peer bool
	// SameJob: Holder is of this run's own job (another step of it, or
	// the run before a requeue, still going).
	SameJob bool
}

func (e *LockedError) Error() string {
	switch {
	case e.Peer:
		return fmt.Sprintf("checkpoint directory %s is in use by another run (rank 0 says which): wait for it, or use another --checkpoint-dir", e.Dir)
	case e.Unsure:
		return fmt.Sprintf("checkpoint directory %s may be in use by %s: this file system does not support locks, so batchkit cannot tell whether that run still runs; if it does not, remove %s",
			e.Dir, e.Holder, filepath.Join(e.Dir, LockFileName))
	case e.Holder == nil:
		return fmt.Sprintf("checkpoint directory %s is in use by another run (%s is locked but names none): wait for it, or use another --checkpoint-dir",
			e.Dir, filepath.Join(e.Dir, LockFileName))
	}
	same := ""
	if e.SameJob {
		same = " (this same job: another of its steps, or its run before a requeue, still going)"
	}
	return fmt.Sprintf("checkpoint directory %s is in use by %s%s: wait for it, or use another --checkpoint-dir", e.Dir, e.Holder, same)
}

// LockError is a checkpoint directory that cannot be locked or used for a
// reason of its own: it cannot be created or written, its file system has
// no room for a checkpoint, or its lock file is not a regular file.
type LockError struct {
	Dir string
	Err error
}

func (e *LockError) Error() string {
	return fmt.Sprintf("cannot use checkpoint directory %s: %v", e.Dir, e.Err)
}
func (e *LockError) Unwrap() error { return e.Err }

// LockLostError is a lock this run held that another run has taken: the
// run stops rather than write beside it. It happens where flock(2) does
// not reach across hosts, or when the lock file was removed by hand.
type LockLostError struct {
	Dir    string
	Holder *LockOwner // nil: the lock file names no run
}

func (e *LockLostError) Error() string {
	who := "another run"
	if e.Holder != nil {
		who = e.Holder.String()
	}
	return fmt.Sprintf("checkpoint directory %s was taken by %s while this run held it (do locks work across hosts on this file system?): two runs on one directory; stopping without writing",
		e.Dir, who)
}

// DirLock is a checkpoint directory's lock, held (LockCheckpointDir).
type DirLock struct {
	dir, path string
	f         *os.File
	id        fileID // of the lock file; size and time zero
	content   []byte
	owner     LockOwner
	flocked   bool // false: the file system does not lock; the content alone marks the directory
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

// LockCheckpointDir creates dir if missing and locks it for owner: the
// lock file's flock, then owner written into it. A directory locked by a
// live run is a *LockedError naming it; a lock file the kernel no longer
// locks was left by a run that died, and is taken over, reported through
// warn, together with the temporary files of dead writers (sweepTemps). On
// a file system that does not lock, warn says so and the lock file's
// content alone is checked. Unlock releases the lock.
func LockCheckpointDir(dir string, owner LockOwner, warn func(error)) (*DirLock, error) {
	if warn == nil {
		warn = func(error) {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, &LockError{Dir: dir, Err: err}
	}
	content, err := json.Marshal(owner)
	if err != nil {
		return nil, err
	}
	l := &DirLock{dir: dir, path: filepath.Join(dir, LockFileName), owner: owner, content: append(content, '\n'), warn: warn}
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
		return nil, &LockError{Dir: dir, Err: err}
	}
	sweepTemps(dir, time.Now(), parseOwner(prev), l.flocked)
	return l, nil
}

// acquire opens and flocks the lock file, the one at l.path when it is
// locked (a run that unlocks removes it: an flock got on a removed file is
// let go and the new file tried). It returns the file's previous content.
func (l *DirLock) acquire() ([]byte, error) {
	for range 50 {
		f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
		switch {
		case errors.Is(err, syscall.ELOOP):
			return nil, &LockError{Dir: l.dir, Err: fmt.Errorf("%s is a symbolic link (not followed): remove it", l.path)}
		case errors.Is(err, syscall.EISDIR):
			return nil, &LockError{Dir: l.dir, Err: fmt.Errorf("%s is a directory: remove it", l.path)}
		case err != nil:
			return nil, &LockError{Dir: l.dir, Err: err}
		}
		fi, err := f.Stat()
		if err == nil && !fi.Mode().IsRegular() {
			err = fmt.Errorf("%s is %s, not a regular file: remove it", l.path, outfile.KindOf(fi.Mode()))
		}
		if err != nil {
			f.Close()
			return nil, &LockError{Dir: l.dir, Err: err}
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
			return nil, &LockError{Dir: l.dir, Err: fmt.Errorf("flock %s: %w", l.path, err)}
		}
		l.flocked = err == nil
		if at, err := os.Lstat(l.path); err != nil || !os.SameFile(at, fi) {
			f.Close() // unlocked and removed, or replaced, since it was opened
			continue
		}
		b := make([]byte, maxLockBytes)
		n, _ := f.ReadAt(b, 0)
		l.f, l.id = f, fileID{dev: idOf(fi).dev, ino: idOf(fi).ino}
		return b[:n], nil
	}
	return nil, &LockError{Dir: l.dir, Err: fmt.Errorf("%s keeps being removed and created again", l.path)}
}

// readHolder reads the owner in the lock file of another run, which may
// not have written it yet: an incomplete line, or the name of a process of
// this host (host) that no longer runs (the dead run it is taking over), is
// read again for up to a second.
func readHolder(f *os.File, host string) *LockOwner {
	b := make([]byte, maxLockBytes)
	var o *LockOwner
	for range 100 {
		n, _ := f.ReadAt(b, 0)
		if o = parseOwner(b[:n]); o != nil && (o.Host != host || alive(o.PID)) {
			return o
		}
		time.Sleep(10 * time.Millisecond)
	}
	return o
}

// parseOwner is the owner a lock file's content names, or nil.
func parseOwner(b []byte) *LockOwner {
	line, ok := bytes.CutSuffix(b, []byte("\n"))
	if !ok || bytes.ContainsRune(line, '\n') {
		return nil
	}
	var o LockOwner // fields a later version may add are ignored
	if json.Unmarshal(line, &o) != nil || o.Host == "" || o.PID <= 0 {
		return nil
	}
	return &o
}

// deadHere reports whether o is a process of this host that no longer runs.
func (l *DirLock) deadHere(o *LockOwner) bool {
	return o.Host == l.owner.Host && !alive(o.PID)
}

// alive reports whether pid is a process here (another user's too).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// reportTakeover tells of the lock file a dead run left, if any.
func (l *DirLock) reportTakeover(prev []byte) {
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
func (l *DirLock) write() error {
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
func (l *DirLock) held() (ok, same bool, content []byte, err error) {
	fi, err := os.Lstat(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil, nil
	}
	if err != nil {
		return false, false, nil, err
	}
	if id := idOf(fi); id.dev != l.id.dev || id.ino != l.id.ino {
		return false, false, nil, nil
	}
	b := make([]byte, maxLockBytes)
	n, err := l.f.ReadAt(b, 0)
	if n == 0 && err != nil && !errors.Is(err, io.EOF) {
		return false, true, nil, err
	}
	return bytes.Equal(b[:n], l.content), true, b[:n], nil
}

// check is run before every checkpoint: the lock is still this run's. A
// lock file that names another run is a *LockLostError; one removed or
// replaced by hand is locked again (if nobody holds it), one overwritten
// with junk written again, each reported.
func (l *DirLock) check() error {
	ok, same, content, err := l.held()
	switch {
	case err != nil || ok:
		return err
	case same:
		if o := parseOwner(content); o != nil {
			return &LockLostError{Dir: l.dir, Holder: o} // flock did not keep it out
		}
		l.warn(fmt.Errorf("checkpoint directory %s: its lock file %s was overwritten while this run held it: written again", l.dir, l.path))
		return l.write()
	}
	again := &DirLock{dir: l.dir, path: l.path, owner: l.owner, content: l.content, warn: l.warn}
	prev, err := again.acquire()
	var le *LockedError
	if errors.As(err, &le) {
		return &LockLostError{Dir: l.dir, Holder: le.Holder}
	}
	if err != nil {
		return err
	}
	if o := parseOwner(prev); o != nil && !again.flocked {
		again.f.Close()
		return &LockLostError{Dir: l.dir, Holder: o}
	}
	if err := again.write(); err != nil {
		again.f.Close()
		return err
	}
	l.warn(fmt.Errorf("checkpoint directory %s: its lock file %s was removed or replaced while this run held it: locked again", l.dir, l.path))
	l.f.Close()
	l.f, l.id, l.flocked = again.f, again.id, again.flocked
	return nil
}

// Unlock releases the lock: the lock file is removed if it is still this
// run's, then its flock let go. It may be called more than once.
func (l *DirLock) Unlock() error {
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

// tempStale is how long a temporary file of another host (or of an older
// batchkit, whose names say no host) must have been left unmodified before
// the run that locks the directory removes it: a writer modifies its file
// until it renames it, and no fsync takes an hour.
const tempStale = time.Hour

// sweepTemps removes, once the directory is locked, the temporary files of
// writers that are gone: those of prev (the run whose lock was taken over,
// dead since its flock is free; not when the file system does not lock),
// those of processes of this host that no longer run, and any not modified
// for tempStale. It leaves every other, which a live writer may be about
// to rename.
func sweepTemps(dir string, now time.Time, prev *LockOwner, flocked bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	here := tempHost(hostname())
	for _, e := range ents {
		name := e.Name()
		old := strings.HasPrefix(name, ".ckpt-") && strings.HasSuffix(name, ".tmp") // before the names said host and PID
		if !e.Type().IsRegular() || !(strings.HasPrefix(name, tempMark) || old) {
			continue
		}
		host, pid := tempOwner(name)
		dead := host != "" && (flocked && prev != nil && host == tempHost(prev.Host) && pid == prev.PID ||
			host == here && pid != os.Getpid() && !alive(pid))
		if !dead {
			fi, err := e.Info()
			dead = err == nil && now.Sub(fi.ModTime()) > tempStale
		}
		if dead {
			os.Remove(filepath.Join(dir, name))
		}
	}
}

// tempOwner is the host and PID a temporary file's name carries
// (".ckpt-tmp.HOST.PID.RANDOM"), or "", 0.
func tempOwner(name string) (string, int) {
	f := strings.Split(strings.TrimPrefix(name, tempMark), ".")
	if !strings.HasPrefix(name, tempMark) || len(f) != 3 {
		return "", 0
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil || pid <= 0 {
		return "", 0
	}
	return f[0], pid
}

// Rank 0's answer to "is the checkpoint directory locked?", sent to every
// rank (openCheckpointDir).
const (
	lockOK = iota
	lockInUse
	lockUnusable
	lockFailed
)

// openCheckpointDir is a run's checkpoint directory, nil without one. Rank
// 0, which writes the checkpoints, locks it before any rank reads from it
// and checks that a checkpoint of need bytes can be written there
// (writable); every rank learns whether it could (one Allgather, in every
// run of more than one rank): when rank 0 is refused, every rank returns
// at once, before the first step, whatever launched them. Its close
// releases the lock.
func openCheckpointDir(c Comm, cfg Config, need int64) (*checkpointDir, error) {
	var (
		d      *checkpointDir
		err    error
		status = lockOK
	)
	if cfg.CheckpointDir != "" {
		d = newCheckpointDir(cfg.CheckpointDir, cfg.Warn)
	}
	if d != nil && c.Rank() == 0 {
		owner := LockOwner{Host: hostname(), PID: os.Getpid(), JobID: cfg.JobID, Since: time.Now().Truncate(time.Second)}
		d.lock, err = LockCheckpointDir(cfg.CheckpointDir, owner, cfg.Warn)
		if err == nil {
			if err = writable(cfg.CheckpointDir, need); err != nil {
				d.lock.Unlock()
				d.lock = nil
			}
		}
		var (
			le *LockedError
			ue *LockError
		)
		switch {
		case errors.As(err, &le):
			status = lockInUse
		case errors.As(err, &ue):
			status = lockUnusable
		case err != nil:
			status = lockFailed
		}
	}
	if c.Size() > 1 {
		// Every rank passes the same Config; but should one lack the
		// directory, the collectives still match.
		all := make([]float64, c.Size())
		if gerr := c.Allgather([]float64{float64(status)}, all); gerr != nil {
			d.close()
			if d == nil {
				return nil, fmt.Errorf("start-up: %w", gerr)
			}
			return nil, fmt.Errorf("checkpoint directory lock: %w", gerr)
		}
		status = int(all[0])
	}
	switch {
	case err != nil:
		return nil, err
	case status == lockOK:
		return d, nil
	case status == lockInUse:
		return nil, &LockedError{Dir: cfg.CheckpointDir, Peer: true}
	case status == lockUnusable:
		return nil, &LockError{Dir: cfg.CheckpointDir, Err: errors.New("rank 0 could not (its error says why)")}
	}
	return nil, fmt.Errorf("checkpoint directory %s: rank 0 could not lock it (its error says why)", cfg.CheckpointDir)
}

// writable refuses, as a *LockError, a checkpoint directory where a
// checkpoint of need bytes cannot be written: one whose lock file could be
// opened (left there by an earlier run) but where no file can be created
// (read-only, another user's), or whose file system has no room for it.
// Found now, before the first step, not when the first checkpoint or the
// last is due.
func writable(dir string, need int64) error {
	if err := outfile.CheckSpace(dir, need); err != nil {
		return &LockError{Dir: dir, Err: err}
	}
	f, err := os.OpenFile(filepath.Join(dir, tempPrefix()+"probe"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return &LockError{Dir: dir, Err: fmt.Errorf("cannot create a file in it: %w", unwrapPath(err))}
	}
	f.Close()
	return os.Remove(f.Name())
}

// close releases the lock d holds, if any.
func (d *checkpointDir) close() error {
	if d == nil {
		return nil
	}
	return d.lock.Unlock()
}
