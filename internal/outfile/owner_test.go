package outfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// A user who may replace someone else's file (a directory both can write)
// gets a refusal, not a file that silently changed owner. Root runs this test
// binary again as nobody, which does the Write.
func TestWriteRefusesOtherOwner(t *testing.T) {
	if path := os.Getenv("OUTFILE_TEST_OWNER"); path != "" {
		err := Write(path, []byte("new"), 0o644, true)
		fmt.Println(err)
		var oe *OwnerError
		if !errors.As(err, &oe) || !errors.Is(err, fs.ErrPermission) || oe.UID != 0 {
			os.Exit(3)
		}
		return
	}
	if os.Getuid() != 0 {
		t.Skip("needs root, to be nobody and to own a file nobody may replace")
	}
	dir, err := os.MkdirTemp("", "outfile-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil { // nobody may rename in it
		t.Fatal(err)
	}
	path := filepath.Join(dir, "job.sh")
	regular("job.sh", 0o644)(t, dir)
	before := snapshot(t, dir)
	self := filepath.Join(dir, "outfile.test") // the build directory is root's alone
	copyFile(t, self)

	cmd := exec.Command(self, "-test.run=^TestWriteRefusesOtherOwner$")
	cmd.Env = append(os.Environ(), "OUTFILE_TEST_OWNER="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v, want an *OwnerError\n%s", err, out)
	}
	t.Logf("as nobody: %s", out)
	after := snapshot(t, dir)
	delete(after, "outfile.test")
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("directory changed: %v, was %v", after, before)
	}
}

func copyFile(t *testing.T, to string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
