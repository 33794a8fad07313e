package dirlock

import (
	"fmt"
	"path/filepath"
	"time"
)

// Owner is the run that holds a directory: the lock file's one JSON line.
type Owner struct {
	Host  string    `json:"host"`
	PID   int       `json:"pid"`
	JobID string    `json:"job_id,omitempty"`
	Since time.Time `json:"since"`
}

func (o Owner) String() string {
	s := fmt.Sprintf("host %s pid %d", o.Host, o.PID)
	if o.JobID != "" {
		s += fmt.Sprintf(" (job %s)", o.JobID)
	}
	if !o.Since.IsZero() {
		s += " since " + o.Since.Format(time.RFC3339)
	}
	return s
}

// LockedError is a directory in use by another run: a second run is
// refused before its first step.
type LockedError struct {
	Dir    string
	Holder *Owner // nil: the lock file names no run (being written, or junk)
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
			e.Dir, e.Holder, filepath.Join(e.Dir, FileName))
	case e.Holder == nil:
		return fmt.Sprintf("checkpoint directory %s is in use by another run (%s is locked but names none): wait for it, or use another --checkpoint-dir",
			e.Dir, filepath.Join(e.Dir, FileName))
	}
	same := ""
	if e.SameJob {
		same = " (this same job: another of its steps, or its run before a requeue, still going)"
	}
	return fmt.Sprintf("checkpoint directory %s is in use by %s%s: wait for it, or use another --checkpoint-dir", e.Dir, e.Holder, same)
}

// UnusableError is a directory that cannot be locked or used for a reason
// of its own: it cannot be created or written, its file system has no room
// (the caller's check), or its lock file is not a regular file.
type UnusableError struct {
	Dir string
	Err error
}

func (e *UnusableError) Error() string {
	return fmt.Sprintf("cannot use checkpoint directory %s: %v", e.Dir, e.Err)
}
func (e *UnusableError) Unwrap() error { return e.Err }

// LostError is a lock this run held that another run has taken: the run
// stops rather than write beside it. It happens where flock(2) does not
// reach across hosts, or when the lock file was removed by hand.
type LostError struct {
	Dir    string
	Holder *Owner // nil: the lock file names no run
}

func (e *LostError) Error() string {
	who := "another run"
	if e.Holder != nil {
		who = e.Holder.String()
	}
	return fmt.Sprintf("checkpoint directory %s was taken by %s while this run held it (do locks work across hosts on this file system?): two runs on one directory; stopping without writing",
		e.Dir, who)
}
