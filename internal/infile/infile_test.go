package infile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What a user may name as an input file: only a regular one of bounded size
// is read, and nothing blocks or runs on (a FIFO, /dev/zero).
func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	small := write("small.toml", "a = 1\n")
	big := write("big.toml", strings.Repeat("x", 101))
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	toFifo := filepath.Join(dir, "to-fifo")
	os.Symlink(fifo, toFifo)
	toSmall := filepath.Join(dir, "to-small")
	os.Symlink(small, toSmall)
	for _, tc := range []struct {
		name, path, want, err string
	}{
		{"a regular file", small, "a = 1\n", ""},
		{"a link to one", toSmall, "a = 1\n", ""},
		{"a FIFO", fifo, "", "is a FIFO, not a regular file"},
		{"a link to a FIFO", toFifo, "", "is a FIFO, not a regular file"},
		{"a directory", dir, "", "is a directory, not a regular file"},
		{"/dev/zero", "/dev/zero", "", "is a character device, not a regular file"},
		{"too large", big, "", "101 bytes, more than the 100 such a file may have"},
		{"missing", filepath.Join(dir, "nope"), "", "no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				b, err := Read(tc.path, 100)
				if tc.err == "" && (err != nil || string(b) != tc.want) {
					t.Errorf("Read(%s) = %q, %v; want %q", tc.path, b, err, tc.want)
				}
				if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
					t.Errorf("Read(%s) error %v, want %q", tc.path, err, tc.err)
				}
				if cerr := Check(tc.path); (cerr == nil) != (tc.err == "" || strings.Contains(tc.err, "bytes")) {
					t.Errorf("Check(%s) = %v", tc.path, cerr)
				}
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("Read(%s) blocked", tc.path)
			}
		})
	}
	var nre *NotRegularError
	if _, err := Read(fifo, 100); !errors.As(err, &nre) || nre.Kind != "a FIFO" {
		t.Errorf("Read(fifo) = %v, want a *NotRegularError", err)
	}
	if _, err := Read(filepath.Join(dir, "nope"), 100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file's error %v is not fs.ErrNotExist", err)
	}
}

// Named says each kind of refusal of the file as the user named it, once.
func TestNamed(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 10), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"missing", filepath.Join(dir, "nope"), "--hostfile h: no such file or directory"},
		{"a FIFO", fifo, "--hostfile h is a FIFO, not a regular file"},
		{"a directory", dir, "--hostfile h is a directory, not a regular file"},
		{"too large", big, "--hostfile h: 10 bytes, more than the 4 such a file may have"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(tc.path, 4)
			got := Named("--hostfile h", err)
			if got.Error() != tc.want {
				t.Errorf("Named = %q, want %q", got, tc.want)
			}
			if !errors.Is(got, err) && !errors.Is(got, fs.ErrNotExist) {
				t.Errorf("Named(%v) does not wrap its cause", err)
			}
		})
	}
}
