// Package plotfile is what batchkit bench's and train's --plot share: the
// image formats a plot file may have, and the check of its path before a
// run, so that a plot that could not be written is refused before any
// rank connects rather than after the run it draws.
package plotfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/batchkit/batchkit/internal/outfile"
)

// Formats are the image formats a plot is written in, by file extension.
var Formats = []string{"png", "svg", "pdf"}

// Format is the format of a plot file, from its extension, or an error
// naming the ones supported.
func Format(path string) (string, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if !slices.Contains(Formats, ext) {
		return "", fmt.Errorf("%q: want a file name ending in .%s", path, strings.Join(Formats, ", ."))
	}
	return ext, nil
}

// Check refuses a plot path that could not be written, or that would
// replace a file without replace (never one of inputs, whatever replace:
// that would lose the results the plot draws), or that is not a regular
// file (outfile.Check). The error begins with the quoted path.
func Check(path string, inputs []string, replace bool) error {
	if _, err := Format(path); err != nil {
		return err
	}
	var nre *outfile.NotRegularError
	if err := outfile.Check(path); errors.As(err, &nre) {
		return fmt.Errorf("%q: is %s, not a regular file", path, nre.Kind)
	}
	if fi, err := os.Stat(path); err == nil {
		for _, in := range inputs {
			if ii, err := os.Stat(in); err == nil && os.SameFile(fi, ii) {
				return fmt.Errorf("%q: it is the result file %s, which the plot would replace", path, in)
			}
		}
		if !replace {
			return fmt.Errorf("%q: file exists (use --force to replace it)", path)
		}
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%q: no directory %s", path, dir)
	}
	if err := syscall.Access(dir, accessWrite); err != nil {
		return fmt.Errorf("%q: cannot write in %s: %v", path, dir, err)
	}
	return nil
}

// accessWrite is access(2)'s W_OK.
const accessWrite = 0x2

// Refused is outfile's refusal of a destination, which is the user's to
// fix even after a run: Check saw the path before the run, but it may have
// changed since, and an owner cannot be checked ahead.
func Refused(err error) bool {
	var (
		nre *outfile.NotRegularError
		oe  *outfile.OwnerError
	)
	return errors.As(err, &nre) || errors.As(err, &oe)
}
