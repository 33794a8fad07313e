package outfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.sh")
	read := func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	if err := Write(path, []byte("one"), 0o755, false); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); read() != "one" || fi.Mode().Perm() != 0o755 {
		t.Errorf("new file: %q, mode %v", read(), fi.Mode())
	}
	// Refused without replace, and untouched.
	if err := Write(path, []byte("two"), 0o755, false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("existing file without replace: %v, want fs.ErrExist", err)
	}
	if read() != "one" {
		t.Errorf("refused write changed the file to %q", read())
	}
	// Replaced whole, keeping its mode (perm is for a new file), no
	// temporary file left.
	if err := Write(path, []byte("three"), 0o644, true); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); read() != "three" || fi.Mode().Perm() != 0o755 {
		t.Errorf("replaced file: %q, mode %v", read(), fi.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
	// A failure names the file asked for, not the temporary one.
	missing := filepath.Join(dir, "no", "such", "dir", "p.png")
	for _, replace := range []bool{false, true} {
		err := Write(missing, []byte("x"), 0o644, replace)
		if err == nil || !strings.Contains(err.Error(), missing+":") {
			t.Errorf("replace=%v into a missing directory: %v, want an error naming %s", replace, err, missing)
		}
	}
}
