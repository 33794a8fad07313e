package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// What every kind of destination becomes, with and without replace. Each row
// gets a directory of its own; the test compares the whole directory before
// and after, so "untouched" and "no temporary file left" are one check.
// Never the real /dev/null: a device node is made here, by root.
func TestWriteDestinations(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0o022))
	me := os.Getuid()
	root := me == 0
	tests := []struct {
		name     string
		rootOnly bool
		setup    func(t *testing.T, dir string) // makes dir/out (and what it points to)
		replace  bool
		wantErr  string            // errText's form
		changes  map[string]string // dir's entries after, over those before; nil: untouched
	}{
		{name: "new file", setup: nothing, wantErr: "",
			changes: map[string]string{"out": file(0o755, me, "new")}},
		{name: "new file, replace", setup: nothing, replace: true, wantErr: "",
			changes: map[string]string{"out": file(0o755, me, "new")}},
		{name: "existing file", setup: regular("out", 0o700), wantErr: "exists"},
		{name: "existing file, replace: mode kept", setup: regular("out", 0o700), replace: true,
			changes: map[string]string{"out": file(0o700, me, "new")}},
		{name: "someone else's file, replace: mode and owner kept", rootOnly: true, setup: chowned("out", 12345), replace: true,
			changes: map[string]string{"out": file(0o640, 12345, "new")}},

		{name: "FIFO", setup: fifo("out"), wantErr: "not regular: a FIFO"},
		{name: "FIFO, replace", setup: fifo("out"), replace: true, wantErr: "not regular: a FIFO"},
		{name: "socket, replace", setup: socket("out"), replace: true, wantErr: "not regular: a socket"},
		{name: "directory", setup: directory("out"), wantErr: "not regular: a directory"},
		{name: "directory, replace", setup: directory("out"), replace: true, wantErr: "not regular: a directory"},
		{name: "device", rootOnly: true, setup: device("out"), wantErr: "not regular: a character device"},
		{name: "device, replace", rootOnly: true, setup: device("out"), replace: true, wantErr: "not regular: a character device"},

		{name: "link to a file", setup: link(regular("target", 0o700)), wantErr: "exists"},
		{name: "link to a file, replace: written through", setup: link(regular("target", 0o700)), replace: true,
			changes: map[string]string{"target": file(0o700, me, "new")}},
		{name: "link to a FIFO", setup: link(fifo("target")), wantErr: "not regular: a symbolic link to a FIFO"},
		{name: "link to a FIFO, replace", setup: link(fifo("target")), replace: true, wantErr: "not regular: a symbolic link to a FIFO"},
		{name: "link to a device, replace", rootOnly: true, setup: link(device("target")), replace: true,
			wantErr: "not regular: a symbolic link to a character device"},
		{name: "link to a directory, replace", setup: link(directory("target")), replace: true,
			wantErr: "not regular: a symbolic link to a directory"},
		{name: "dangling link", setup: link(nothing), wantErr: "not regular: a dangling symbolic link"},
		{name: "dangling link, replace", setup: link(nothing), replace: true, wantErr: "not regular: a dangling symbolic link"},
		{name: "link loop, replace", setup: loop, replace: true, wantErr: "not regular: a symbolic link loop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.rootOnly && !root {
				t.Skip("needs root")
			}
			dir := t.TempDir()
			tt.setup(t, dir)
			before := snapshot(t, dir)
			err := Write(filepath.Join(dir, "out"), []byte("new"), 0o755, tt.replace)
			if diff := cmp.Diff(tt.wantErr, errText(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s\nerror: %v", diff, err)
			}
			want := before
			for name, state := range tt.changes {
				want[name] = state
			}
			if diff := cmp.Diff(want, snapshot(t, dir)); diff != "" {
				t.Errorf("directory after Write (-want +got):\n%s", diff)
			}
		})
	}
}

// The refusal is one line that names the path and what is there.
func TestNotRegularMessage(t *testing.T) {
	dir := t.TempDir()
	fifo("out")(t, dir)
	path := filepath.Join(dir, "out")
	err := Write(path, []byte("x"), 0o644, true)
	want := path + ": is a FIFO, not a regular file"
	if err == nil || err.Error() != want {
		t.Errorf("Write over a FIFO: %v, want %q", err, want)
	}
}

// classify is the policy; every combination of lstat's and stat's answers.
func TestClassify(t *testing.T) {
	loopErr := &fs.PathError{Op: "stat", Path: "l", Err: syscall.ELOOP}
	tests := []struct {
		name         string
		lmode, tmode fs.FileMode
		terr         error
		want         string
	}{
		{"regular", 0o644, 0, nil, ""},
		{"directory", fs.ModeDir | 0o755, 0, nil, "a directory"},
		{"FIFO", fs.ModeNamedPipe, 0, nil, "a FIFO"},
		{"socket", fs.ModeSocket, 0, nil, "a socket"},
		{"character device", fs.ModeDevice | fs.ModeCharDevice, 0, nil, "a character device"},
		{"block device", fs.ModeDevice, 0, nil, "a block device"},
		{"irregular", fs.ModeIrregular, 0, nil, "an irregular file"},
		{"link to a file", fs.ModeSymlink, 0o600, nil, ""},
		{"link to a FIFO", fs.ModeSymlink, fs.ModeNamedPipe, nil, "a symbolic link to a FIFO"},
		{"link to a device", fs.ModeSymlink, fs.ModeDevice | fs.ModeCharDevice, nil, "a symbolic link to a character device"},
		{"link to a directory", fs.ModeSymlink, fs.ModeDir, nil, "a symbolic link to a directory"},
		{"dangling link", fs.ModeSymlink, 0, fs.ErrNotExist, "a dangling symbolic link"},
		{"link through a file", fs.ModeSymlink, 0, syscall.ENOTDIR, "a dangling symbolic link"},
		{"link loop", fs.ModeSymlink, 0, loopErr, "a symbolic link loop"},
		{"link not followed: the caller's error", fs.ModeSymlink, 0, fs.ErrPermission, ""},
	}
	for _, tt := range tests {
		if got := classify(tt.lmode, tt.tmode, tt.terr); got != tt.want {
			t.Errorf("%s: classify(%v, %v, %v) = %q, want %q", tt.name, tt.lmode, tt.tmode, tt.terr, got, tt.want)
		}
	}
}

// errText is an error's class: "", "exists", "not regular: KIND" or the text.
func errText(err error) string {
	var nre *NotRegularError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &nre):
		return "not regular: " + nre.Kind
	case errors.Is(err, fs.ErrExist):
		return "exists"
	}
	return err.Error()
}

// snapshot describes every entry of dir without opening any but regular
// files: reading a FIFO would block, a device could be anything.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		switch m[e.Name()] = KindOf(fi.Mode()); {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			m[e.Name()] = file(fi.Mode().Perm(), int(fi.Sys().(*syscall.Stat_t).Uid), string(b))
		case fi.Mode()&fs.ModeSymlink != 0:
			to, _ := os.Readlink(p)
			m[e.Name()] = "link to " + to
		}
	}
	return m
}

func file(perm fs.FileMode, uid int, content string) string {
	return fmt.Sprintf("file %04o uid %d %q", perm, uid, content)
}

// Setups: each makes one entry in dir.

func nothing(*testing.T, string) {}

func regular(name string, perm fs.FileMode) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("old"), perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil { // past the umask
			t.Fatal(err)
		}
	}
}

func chowned(name string, uid int) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		regular(name, 0o640)(t, dir)
		if err := os.Chown(filepath.Join(dir, name), uid, uid); err != nil {
			t.Fatal(err)
		}
	}
}

func fifo(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func socket(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		l, err := net.Listen("unix", filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
}

func directory(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// device makes a node like /dev/null's (1, 3), here: writing to it would be
// harmless, replacing it breaks nothing but the test.
func device(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		dev := 1<<8 | 3 // makedev(1, 3)
		if err := syscall.Mknod(filepath.Join(dir, name), syscall.S_IFCHR|0o666, dev); err != nil {
			t.Skipf("mknod: %v", err)
		}
	}
}

// link makes dir/out a symbolic link to dir/target, made by setup.
func link(setup func(*testing.T, string)) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		setup(t, dir)
		if err := os.Symlink("target", filepath.Join(dir, "out")); err != nil {
			t.Fatal(err)
		}
	}
}

func loop(t *testing.T, dir string) {
	for _, l := range [][2]string{{"b", "out"}, {"out", "b"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
}

// Append keeps what is there, creates what is not, and refuses, at once,
// what is not a regular file: a FIFO with no reader must not block it.
func TestAppendDestinations(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		wantErr string
		changes map[string]string
	}{
		{name: "new file", setup: nothing, changes: map[string]string{"out": file(0o644, os.Getuid(), "new")}},
		{name: "existing file: appended", setup: regular("out", 0o600),
			changes: map[string]string{"out": file(0o600, os.Getuid(), "oldnew")}},
		{name: "link to a file: appended through", setup: link(regular("target", 0o600)),
			changes: map[string]string{"target": file(0o600, os.Getuid(), "oldnew")}},
		{name: "FIFO", setup: fifo("out"), wantErr: "not regular: a FIFO"},
		{name: "link to a FIFO", setup: link(fifo("target")), wantErr: "not regular: a symbolic link to a FIFO"},
		{name: "directory", setup: directory("out"), wantErr: "not regular: a directory"},
		{name: "dangling link", setup: link(nothing), wantErr: "not regular: a dangling symbolic link"},
	}
	defer syscall.Umask(syscall.Umask(0o022))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			before := snapshot(t, dir)
			done := make(chan error, 1)
			go func() {
				f, err := Append(filepath.Join(dir, "out"), 0o644)
				if err == nil {
					_, err = f.Write([]byte("new"))
					if cerr := f.Close(); err == nil {
						err = cerr
					}
				}
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Append blocked")
			}
			if diff := cmp.Diff(tt.wantErr, errText(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s\nerror: %v", diff, err)
			}
			want := before
			for name, state := range tt.changes {
				want[name] = state
			}
			if diff := cmp.Diff(want, snapshot(t, dir)); diff != "" {
				t.Errorf("directory after Append (-want +got):\n%s", diff)
			}
		})
	}
}
