package shquote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/internal/hostile"
)

func TestQuote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "''"},
		{"train", "train"},
		{"--nodes=2", "--nodes=2"},
		{"a,b", "a,b"},
		{"/path/x.py", "/path/x.py"},
		{"user@host:22", "user@host:22"},
		{"50%+1", "50%+1"},
		{"a=b", "'a=b'"},
		{"x.y=b", "x.y=b"},
		{"-x=1", "-x=1"},
		{"=ls", "'=ls'"},
		{"MASTER_ADDR=node1", "'MASTER_ADDR=node1'"},
		{"_9=", "'_9='"},
		{"9a=b", "9a=b"},
		{"a:=ls", "'a:=ls'"},
		{"~root", "'~root'"},
		{"a~b", "'a~b'"},
		{"#x", "'#x'"},
		{"a#x", "'a#x'"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"'", `''\'''`},
		{"$(x)", "'$(x)'"},
		{"a\nb", "'a\nb'"},
		{"é", "'é'"},
		{"\xff\xfe", "'\xff\xfe'"},
		{"a\n'; touch PWNED; #", "'a\n'\\''; touch PWNED; #'"},
	} {
		got, err := Quote(c.in)
		if err != nil {
			t.Errorf("Quote(%q): %v", c.in, err)
			continue
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("Quote(%q) (-want +got):\n%s", c.in, diff)
		}
	}
}

func TestNUL(t *testing.T) {
	for _, err := range []error{
		second(Quote("a\x00b")),
		second(Join([]string{"ok", "a\x00b"})),
	} {
		var ne *NULError
		if !errors.Is(err, ErrNUL) || !errors.As(err, &ne) || ne.Value != "a\x00b" {
			t.Errorf("err = %v, want a *NULError for %q that is ErrNUL", err, "a\x00b")
		}
	}
}

func second(_ string, err error) error { return err }

// shells are the shells batchkit's output must mean the same thing in:
// dash (Debian's /bin/sh), bash (the batch scripts) and zsh (users'
// interactive shells).
var shells = []string{"dash", "bash", "zsh"}

// runShell runs the script file with the shell in dir, with args after it,
// and returns its standard output. zsh runs with -f (no startup files
// beyond /etc/zshenv) and bash with no BASH_ENV, so no user's rc files
// take part; the locale is UTF-8 so multibyte handling is exercised.
func runShell(t testing.TB, shell, dir, script string, args ...string) []byte {
	t.Helper()
	path, err := exec.LookPath(shell)
	if err != nil {
		t.Fatalf("%s is not installed (apt-get install %s): the quoting tests need it", shell, shell)
	}
	argv := []string{script}
	if shell == "zsh" {
		argv = []string{"-f", script}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append(argv, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LC_ALL=C.UTF-8"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", shell, script, err, stderr.Bytes())
	}
	return out
}

func writeFile(t testing.TB, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// throughShells checks that every value, quoted, reaches a program byte for
// byte in each shell, two ways: as printf's arguments in a script, and as
// `export Vi=<quoted>` lines eval'd from a command substitution, the way
// batch scripts eval "$(batchkit env --format shell)". It runs in dir,
// where nothing must be created.
func throughShells(t *testing.T, dir string, values []string) {
	t.Helper()
	var args, exports, vars strings.Builder
	for i, v := range values {
		q, err := Quote(v)
		if err != nil {
			t.Fatalf("Quote(%q): %v", v, err)
		}
		fmt.Fprintf(&args, " %s", q)
		fmt.Fprintf(&exports, "export V%d=%s\n", i, q)
		fmt.Fprintf(&vars, ` "$V%d"`, i)
	}
	scripts := t.TempDir()
	writeFile(t, scripts, "exports", exports.String())
	printScript := writeFile(t, scripts, "print.sh", `printf '%s\0'`+args.String()+"\n")
	evalScript := writeFile(t, scripts, "eval.sh", `eval "$(cat "$1")"`+"\nprintf '%s\\0'"+vars.String()+"\n")
	for _, sh := range shells {
		for _, run := range []struct {
			how string
			out []byte
		}{
			{"printf", runShell(t, sh, dir, printScript)},
			{"eval", runShell(t, sh, dir, evalScript, filepath.Join(scripts, "exports"))},
		} {
			got := strings.Split(strings.TrimSuffix(string(run.out), "\x00"), "\x00")
			if len(values) == 0 {
				got = nil
			}
			if diff := cmp.Diff(values, got); diff != "" {
				t.Errorf("%s, %s: values changed (-want +got):\n%s", sh, run.how, diff)
			}
		}
	}
}

// Every byte but NUL, every pair of special characters, and the fuzz seeds,
// in one shell process per shell and way.
func TestThroughShells(t *testing.T) {
	values := []string{"", "'", "''", `\`, `\\'`, "$'", "=", "=ls", "a:=ls", "~", "~root", "#x", "a\n'; touch " + hostile.Marker + "; #"}
	var all []byte
	for b := 1; b < 256; b++ {
		values = append(values, string([]byte{byte(b)}))
		all = append(all, byte(b))
	}
	values = append(values, string(all))
	special := " \t\n\r'\"`$\\!#&()*;<=>?[]^{|}~:%,@+-"
	for _, a := range special {
		for _, b := range special {
			values = append(values, string(a)+string(b), "x"+string(a)+string(b)+"x")
		}
	}
	dir := t.TempDir()
	throughShells(t, dir, values)
	checkNoMarker(t, dir)
}

// Hostile strings, quoted and eval'd, execute nothing: no marker file
// appears in the directory the shells run in.
func TestHostileExecutesNothing(t *testing.T) {
	dir := t.TempDir()
	throughShells(t, dir, hostile.Strings(7, 500, true))
	checkNoMarker(t, dir)
}

func checkNoMarker(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("a quoted value executed a command: it created %s", e.Name())
	}
}

// FuzzQuote: any bytes round-trip through dash, bash and zsh, both printed
// by a script and eval'd as an export line; a NUL byte is an ErrNUL.
// The seeds in testdata/fuzz/FuzzQuote run with every go test.
func FuzzQuote(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		q, err := Quote(string(in))
		if bytes.IndexByte(in, 0) >= 0 {
			if !errors.Is(err, ErrNUL) {
				t.Fatalf("Quote(%q) = %q, %v; want ErrNUL", in, q, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Quote(%q): %v", in, err)
		}
		dir, scripts := t.TempDir(), t.TempDir()
		printScript := writeFile(t, scripts, "print.sh", "printf %s "+q+"\n")
		evalScript := writeFile(t, scripts, "eval.sh", `eval "$1"; printf %s "$V"`+"\n")
		for _, sh := range shells {
			if got := runShell(t, sh, dir, printScript); !bytes.Equal(got, in) {
				t.Errorf("%s: printf %%s %s printed %q, want %q", sh, q, got, in)
			}
			if got := runShell(t, sh, dir, evalScript, "export V="+q); !bytes.Equal(got, in) {
				t.Errorf("%s: eval \"export V=%s\" set %q, want %q", sh, q, got, in)
			}
		}
		checkNoMarker(t, dir)
	})
}
