package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// --write and --plot write only regular files: a FIFO, a device or a link to
// one is refused in one line naming it, exit 2, and stays what it was (as
// root, --write /dev/null --force used to replace the device with a file).
// The device is a node made here, never the real /dev/null.
func TestWriteRefusesNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(dir, "null")
	haveDev := os.Getuid() == 0 && syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3) == nil
	toDev := filepath.Join(dir, "to-null")
	if err := os.Symlink("null", toDev); err != nil {
		t.Fatal(err)
	}
	fifoPNG := filepath.Join(dir, "fifo.png")
	if err := syscall.Mkfifo(fifoPNG, 0o644); err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(dir, "r.jsonl") // plottable: one result
	line := `{"op":"allreduce","backend":"tcp","dtype":"float32","ranks":2,"bytes":8,"count":2,"iters":10,"warmup":1,"avg_us":20.5,"min_us":20.1,"max_us":20.9,"algbw_gbs":0.00039,"busbw_gbs":0.00039}`
	if err := os.WriteFile(results, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		needsDev   bool
		args       []string
		kind       string
		mode       fs.FileMode // the type left at path
	}{
		{"FIFO", fifo, false, sbatchWrite(fifo), "a FIFO", fs.ModeNamedPipe},
		{"FIFO, --force", fifo, false, sbatchWrite(fifo, "--force"), "a FIFO", fs.ModeNamedPipe},
		{"device, --force", dev, true, sbatchWrite(dev, "--force"), "a character device", fs.ModeDevice | fs.ModeCharDevice},
		{"link to a device, --force", toDev, true, sbatchWrite(toDev, "--force"), "a symbolic link to a character device", fs.ModeSymlink},
		{"bench --plot FIFO --force", fifoPNG, false, []string{"bench", "--force", "--plot", fifoPNG, results},
			"a FIFO", fs.ModeNamedPipe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needsDev && !haveDev {
				t.Skip("needs root to make a device node")
			}
			code, stderr := runMain(t, tt.args...)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d", code, exitUsage)
			}
			want := ": is " + tt.kind + ", not a regular file"
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.path) || !strings.HasSuffix(lines[0], want) {
				t.Errorf("stderr %q, want one line naming %s and ending %q", stderr, tt.path, want)
			}
			if fi, err := os.Lstat(tt.path); err != nil || fi.Mode().Type() != tt.mode {
				t.Errorf("%s is now %v (%v), want it untouched", tt.path, fi.Mode(), err)
			}
		})
	}
	if fi, err := os.Stat(dev); haveDev && (err != nil || fi.Mode().Type() != fs.ModeDevice|fs.ModeCharDevice) {
		t.Errorf("the device behind the link is now %v (%v)", fi.Mode(), err)
	}
}

// --write --force keeps a script's mode (chmod 700 stayed 755 before), and
// writes through a link to it, which stays a link.
func TestWriteForceKeepsMode(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte("old\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(script, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sh")
	if err := os.Symlink("job.sh", link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{script, link} {
		if err := os.WriteFile(script, []byte("old\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		if code, stderr := runMain(t, sbatchWrite(path, "--force")...); code != 0 {
			t.Fatalf("--write %s --force: exit %d: %s", path, code, stderr)
		}
		fi, err := os.Stat(script)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(script); !bytes.HasPrefix(b, []byte("#!/bin/bash\n")) || fi.Mode() != 0o700 {
			t.Errorf("--write %s --force: job.sh is %v, %.20q; want 0700 and the script", path, fi.Mode(), b)
		}
		if li, err := os.Lstat(link); err != nil || li.Mode().Type() != fs.ModeSymlink {
			t.Errorf("--write %s --force: link.sh is now %v (%v), want a link", path, li.Mode(), err)
		}
	}
}

func sbatchWrite(path string, more ...string) []string {
	args := append([]string{"sbatch", "--profile", "local", "--batchkit", "/usr/bin/batchkit", "--write", path}, more...)
	return append(args, "-N", "1", "--", "true")
}

func runMain(t *testing.T, args ...string) (int, string) {
	t.Helper()
	t.Setenv("BATCHKIT_PROFILE", "")
	var stdout, stderr bytes.Buffer
	code := Main(append([]string{"batchkit"}, args...), &stdout, &stderr)
	return code, stderr.String()
}
