// Package infile reads the files a user names as input (profiles, templates,
// scripts to source) only when they are regular files of bounded size: a
// FIFO would block the open for ever, /dev/zero would never end, and a
// directory or device is a mistake to say plainly.
package infile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/batchkit/batchkit/internal/outfile"
)

// NotRegularError is a path that is not a regular file (after links).
type NotRegularError struct {
	Path string
	Kind string // "a FIFO", "a directory" ...
}

// Error leaves the path out: every caller names the file already.
func (e *NotRegularError) Error() string { return fmt.Sprintf("is %s, not a regular file", e.Kind) }

// TooLargeError is a file over the size the caller allows.
type TooLargeError struct {
	Path      string
	Size, Max int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%d bytes, more than the %d such a file may have", e.Size, e.Max)
}

// Check reports whether path is a regular file (following links): nil, a
// *NotRegularError, or the *fs.PathError of a missing or unreadable one.
// It opens nothing, so a FIFO cannot block it.
func Check(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if kind := outfile.KindOf(fi.Mode()); kind != "" {
		return &NotRegularError{Path: path, Kind: kind}
	}
	return nil
}

// Read reads path when it is a regular file of at most max bytes. It opens
// with O_NONBLOCK and checks the open file, so that a FIFO swapped in after
// a Check cannot block it either.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if kind := outfile.KindOf(fi.Mode()); kind != "" {
		return nil, &NotRegularError{Path: path, Kind: kind}
	}
	if fi.Size() > max {
		return nil, &TooLargeError{Path: path, Size: fi.Size(), Max: max}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		return nil, &TooLargeError{Path: path, Size: int64(len(b)), Max: max}
	}
	return b, err
}

// Named is err from Check or Read said of subject (the file as the user
// named it, "--hostfile h"): "subject is a FIFO, not a regular file",
// "subject: no such file or directory" (the *fs.PathError's own path left
// out, subject says it), "subject: N bytes, more than ...". It wraps err's
// cause, so errors.As still finds it.
func Named(subject string, err error) error {
	var pe *fs.PathError
	var nr *NotRegularError
	switch {
	case errors.As(err, &nr):
		return fmt.Errorf("%s %w", subject, err)
	case errors.As(err, &pe):
		return fmt.Errorf("%s: %w", subject, pe.Err)
	}
	return fmt.Errorf("%s: %w", subject, err)
}
