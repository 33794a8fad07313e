package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// make install puts the binary, the man page and the three completion
// scripts where packagers expect them, under DESTDIR and PREFIX, and
// nothing else. The build goes to the test's directory (BIN, MAN), not
// the source tree's bin/.
func TestMakeInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds batchkit with make")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make: ", err)
	}
	tmp := t.TempDir()
	dest := filepath.Join(tmp, "dest")
	cmd := exec.Command("make", "--no-print-directory", "-C", "../..", "install", "DESTDIR="+dest, "PREFIX=/opt/bk",
		"BIN="+filepath.Join(tmp, "build", "batchkit"), "MAN="+filepath.Join(tmp, "build", "batchkit.1"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	script := func(shell string) string {
		var b bytes.Buffer
		Main([]string{"batchkit", "completion", shell}, &b, &b)
		return b.String()
	}
	type installed struct {
		mode fs.FileMode
		has  string // part of the content
	}
	want := map[string]installed{
		"opt/bk/bin/batchkit":                                  {0o755, "\x7fELF"},
		"opt/bk/share/man/man1/batchkit.1":                     {0o644, ".TH batchkit 1 "},
		"opt/bk/share/bash-completion/completions/batchkit":    {0o644, script("bash")},
		"opt/bk/share/zsh/site-functions/_batchkit":            {0o644, script("zsh")},
		"opt/bk/share/fish/vendor_completions.d/batchkit.fish": {0o644, script("fish")},
	}
	got := map[string]installed{}
	err := filepath.WalkDir(dest, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dest, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		g := installed{mode: info.Mode().Perm()}
		if w, ok := want[rel]; ok && strings.Contains(string(b), w.has) {
			g.has = w.has // the content is right
		}
		got[rel] = g
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(installed{})); diff != "" {
		t.Errorf("installed files (-want +got):\n%s", diff)
	}
	out, err := exec.Command(filepath.Join(dest, "opt/bk/bin/batchkit"), "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "batchkit ") {
		t.Errorf("the installed batchkit version: %v, %q", err, out)
	}
}
