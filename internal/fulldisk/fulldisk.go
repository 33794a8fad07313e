// Package fulldisk gives tests real file systems that fill up: a tiny
// tmpfs, empty or full, for the checks that refuse a destination with no
// room before the work whose result would be lost, and for what a run
// does when the disk fills under it.
package fulldisk

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// Tmpfs mounts an empty tmpfs of size bytes (a multiple of the 4 KiB page)
// at a new temporary directory and returns it; it is unmounted when the
// test ends. A test that may not mount (not root, no CAP_SYS_ADMIN) is
// skipped.
func Tmpfs(t testing.TB, size int) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

// Mount is a 64 KiB tmpfs filled to the last byte.
func Mount(t testing.TB) string {
	t.Helper()
	dir := Tmpfs(t, 64<<10)
	Fill(t, dir)
	return dir
}

// Fill writes into dir until its file system is full.
func Fill(t testing.TB, dir string) {
	t.Helper()
	f, err := os.CreateTemp(dir, "fill")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			return
		}
	}
}
