package trainer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/batchkit/batchkit/internal/outfile"
	"github.com/batchkit/batchkit/trainer/dirlock"
)

// lockCheckpointDir locks dir for owner (dirlock.Acquire), then removes
// the temporary files of checkpoint writers that are gone (sweepTemps).
func lockCheckpointDir(dir string, owner dirlock.Owner, warn func(error)) (*dirlock.Lock, error) {
	l, err := dirlock.Acquire(dir, owner, warn)
	if err != nil {
		return nil, err
	}
	sweepTemps(dir, time.Now(), l.DeadHolder())
	return l, nil
}

// tempStale is how long a temporary file of another host (or of an older
// batchkit, whose names say no host) must have been left unmodified before
// the run that locks the directory removes it: a writer modifies its file
// until it renames it, and no fsync takes an hour.
const tempStale = time.Hour

// sweepTemps removes, once the directory is locked, the temporary files of
// writers that are gone: those of dead (the run whose lock was taken over,
// dead since its flock was free: Lock.DeadHolder), those of processes of
// this host that no longer run, and any not modified for tempStale. It
// leaves every other, which a live writer may be about to rename.
func sweepTemps(dir string, now time.Time, dead *dirlock.Owner) {
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
		gone := host != "" && (dead != nil && host == tempHost(dead.Host) && pid == dead.PID ||
			host == here && pid != os.Getpid() && !dirlock.Alive(pid))
		if !gone {
			fi, err := e.Info()
			gone = err == nil && now.Sub(fi.ModTime()) > tempStale
		}
		if gone {
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
		owner := dirlock.Owner{Host: hostname(), PID: os.Getpid(), JobID: cfg.JobID, Since: time.Now().Truncate(time.Second)}
		d.lock, err = lockCheckpointDir(cfg.CheckpointDir, owner, cfg.Warn)
		if err == nil {
			if err = writable(cfg.CheckpointDir, need); err != nil {
				d.lock.Unlock()
				d.lock = nil
			}
		}
		var (
			le *dirlock.LockedError
			ue *dirlock.UnusableError
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
		return nil, &dirlock.LockedError{Dir: cfg.CheckpointDir, Peer: true}
	case status == lockUnusable:
		return nil, &dirlock.UnusableError{Dir: cfg.CheckpointDir, Err: errors.New("rank 0 could not (its error says why)")}
	}
	return nil, fmt.Errorf("checkpoint directory %s: rank 0 could not lock it (its error says why)", cfg.CheckpointDir)
}

// writable refuses, as a *dirlock.UnusableError, a checkpoint directory where a
// checkpoint of need bytes cannot be written: one whose lock file could be
// opened (left there by an earlier run) but where no file can be created
// (read-only, another user's), or whose file system has no room for it.
// Found now, before the first step, not when the first checkpoint or the
// last is due.
func writable(dir string, need int64) error {
	if err := outfile.CheckSpace(dir, need); err != nil {
		return &dirlock.UnusableError{Dir: dir, Err: err}
	}
	f, err := os.OpenFile(filepath.Join(dir, tempPrefix()+"probe"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return &dirlock.UnusableError{Dir: dir, Err: fmt.Errorf("cannot create a file in it: %w", unwrapPath(err))}
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
