package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A full TMPDIR is named as such, with what to do, not blamed on the
// script being sourced ("sourcing s.sh failed (exit 125)"; issue 30,
// item 15): full before sourcing, and filled by a script's output. The
// full file system is a real one, a 1 MiB tmpfs (mounting needs root).
func TestEnvsetupFullTmpdir(t *testing.T) {
	mostlyWaits(t)
	if os.Geteuid() != 0 {
		requireOrSkip(t, "mounting a small tmpfs needs root")
	}
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		requireOrSkip(t, "mount tmpfs: "+err.Error())
	}
	t.Cleanup(func() { syscall.Unmount(mnt, 0) })
	scripts := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(scripts, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	quiet := write("quiet.sh", "export BK_X=1\n")
	chatty := write("chatty.sh", "head -c 400000 /dev/zero\nexport BK_X=1\n")
	fill := func(t *testing.T, kib int) {
		t.Helper()
		os.Remove(filepath.Join(mnt, "fill"))
		f, err := os.Create(filepath.Join(mnt, "fill"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.Write(make([]byte, kib<<10)) // up to ENOSPC when kib is more than there is
	}
	want := "batchkit: sourcing writes the environment to the temporary directory " + mnt +
		" ($TMPDIR): no space left on device: free space there or point TMPDIR at another directory\n"
	for _, tt := range []struct {
		name   string
		fill   int // KiB written to the tmpfs first
		script string
	}{
		{"full before sourcing", 2 << 10, quiet},
		// 224 KiB left: room for the dumps, not for the script's 400 KB.
		{"filled by the script's output", 800, chatty},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fill(t, tt.fill)
			cmd := exec.Command(bin, "envsetup", "--source", tt.script)
			cmd.Env = append(os.Environ(), "TMPDIR="+mnt)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 1 || stderr.String() != want {
				t.Errorf("exit %d (%v), stderr %q; want 1, %q", code, err, stderr.String(), want)
			}
			if stdout.Len() > 0 || strings.Contains(stderr.String(), tt.script) {
				t.Errorf("stdout %q, stderr %q: nothing printed, no script blamed", stdout.String(), stderr.String())
			}
		})
	}
}
