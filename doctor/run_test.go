package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// hostileTool is a body for a fake scontrol, mpirun.openmpi and python3
// alike, and what each check's message says of it.
type hostileTool struct {
	name string
	body string            // sh; $0.pid is where a child it leaves behind writes its pid
	want map[string]string // check → in its message
}

var hostileTools = []hostileTool{
	{
		name: "terminal escapes",
		// Retitle the window, clear it, send the cursor home, a C1 CSI,
		// a bidi override, a CR to overwrite the line.
		body: `printf '\033]0;PWNED title\007\033[2J\033[H\302\233c \342\200\256evil\r\nSlurmctld(primary) at ctl is DOWN\n'`,
		want: map[string]string{
			"slurm-controller": `slurmctld does not answer: \x1b]0;PWNED title\a\x1b[2J\x1b[H\u009bc \u202eevil; Slurmctld(primary) at ctl is DOWN`,
			"mpirun":           `cannot tell its MPI flavor from "\x1b]0;PWNED title\a\x1b[2J\x1b[H\u009bc \u202eevil"`,
			"python":           `unexpected probe output "\x1b]0;PWNED title\a\x1b[2J\x1b[H\u009bc \u202eevil"`,
		},
	},
	{
		name: "invalid UTF-8 and NUL",
		body: `printf 'bad \377\376 utf8 \000 nul\n'`,
		want: map[string]string{
			"slurm-controller": `slurmctld does not answer: bad \xff\xfe utf8 \x00 nul`,
			"mpirun":           `cannot tell its MPI flavor from "bad \xff\xfe utf8 \x00 nul"`,
			"python":           `unexpected probe output "bad \xff\xfe utf8 \x00 nul"`,
		},
	},
	{
		name: "prints without end",
		body: `exec yes 'Slurmctld(primary) at ctl is UP mpirun (Open MPI) 4.1.4'`,
		want: map[string]string{
			"slurm-controller": "scontrol ping: printed more than 1 MiB on stdout: stopped",
			"mpirun":           "mpirun.openmpi --version: printed more than 1 MiB on stdout: stopped",
			"python":           "python3 (probe of torch, oneCCL bindings, IPEX): printed more than 1 MiB on stdout: stopped",
		},
	},
	{
		name: "prints on stderr without end",
		body: `yes 'warning: something' >&2`,
		want: map[string]string{
			"slurm-controller": "scontrol ping: printed more than 1 MiB on stderr: stopped",
			"mpirun":           "mpirun.openmpi --version: printed more than 1 MiB on stderr: stopped",
			"python":           "printed more than 1 MiB on stderr: stopped",
		},
	},
	{
		name: "prints 50 MB and exits",
		body: `head -c 50000000 /dev/zero | tr '\0' U`,
		want: map[string]string{
			"slurm-controller": "scontrol ping: printed more than 1 MiB on stdout: stopped",
			"mpirun":           "mpirun.openmpi --version: printed more than 1 MiB on stdout: stopped",
			"python":           "printed more than 1 MiB on stdout: stopped",
		},
	},
	{
		name: "exits leaving a child that holds its output",
		body: "sleep 60 &\necho $! > \"$0.pid\"\necho 'Slurmctld(primary) at ctl is UP'; echo 'mpirun (Open MPI) 4.1.4'",
		want: map[string]string{
			"slurm-controller": "scontrol ping: exited, but a process it left behind held its output open (killed)",
			"mpirun":           "mpirun.openmpi --version: exited, but a process it left behind held its output open (killed)",
			"python":           "python3 (probe of torch, oneCCL bindings, IPEX): exited, but a process it left behind held its output open (killed)",
		},
	},
	{
		name: "fails leaving a child that holds its output",
		body: "sleep 60 &\necho $! > \"$0.pid\"\necho 'no controller' >&2; exit 3",
		want: map[string]string{
			"slurm-controller": "scontrol ping: exit status 3, and a process it left behind held its output open (killed): no controller",
			"mpirun":           "mpirun.openmpi --version: exit status 3, and a process it left behind held its output open (killed): no controller",
			"python":           "exit status 3, and a process it left behind held its output open (killed): no controller",
		},
	},
}

// Tools that print what a terminal acts on, print without end, or leave a
// child holding their output: doctor stays quick and small, names what the
// tool did, kills what it left, and prints nothing a terminal obeys.
func TestHostileTools(t *testing.T) {
	const timeout = 2 * time.Second
	for _, tc := range hostileTools {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range []string{"scontrol", "mpirun.openmpi", "python3"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+tc.body+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
			env := withBash(fake{}.env(localProfile))
			env.Timeout, env.Python, env.SysPython = timeout, filepath.Join(dir, "python3"), ""

			start := time.Now()
			got := run(env, "slurm-controller", "mpirun", "python")
			// Stopped, not timed out: well within one command's timeout.
			if d := time.Since(start); d > timeout {
				t.Errorf("the checks took %v, over the %v timeout", d, timeout)
			}
			for check, in := range tc.want {
				if r := got[check]; !strings.Contains(r.Message, in) {
					t.Errorf("%s = %s %q, want it to contain %q", check, r.Status, r.Message, in)
				}
			}
			var results []Result
			for _, r := range got {
				results = append(results, r)
			}
			assertPrintable(t, results)
			for _, name := range []string{"scontrol", "mpirun.openmpi", "python3"} {
				assertGone(t, filepath.Join(dir, name+".pid"))
			}
		})
	}
}

// The writers escape results that did not come from Run, too.
func TestWritersEscape(t *testing.T) {
	rs := []Result{{Name: "x", Status: Warn, Message: "\x1b]0;t\a\x1b[2J" + strings.Repeat("y\n", 1<<20), Fix: "a\tb\xff"}}
	var text, js bytes.Buffer
	WriteText(&text, rs, true)
	WriteJSON(&js, rs)
	want := `WARN` + "\x1b[0m" + `  x  \x1b]0;t\a\x1b[2Jy\ny\n`
	if got := text.String(); !strings.Contains(got, want) || !strings.Contains(got, `fix: a\tb\xff`) || len(got) > 4<<10 {
		t.Errorf("WriteText wrote %d bytes: %.300q, want %q in it", len(got), got, want)
	}
	if !strings.Contains(js.String(), `"message":"\\x1b]0;t\\a\\x1b[2Jy\\ny\\n`) || !strings.Contains(js.String(), " more bytes]") || js.Len() > 4<<10 {
		t.Errorf("WriteJSON wrote %d bytes: %.300q", js.Len(), js.String())
	}
}

// assertPrintable: every text of rs is one bounded line without a rune a
// terminal acts on, and WriteText and WriteJSON write them so.
func assertPrintable(t *testing.T, rs []Result) {
	t.Helper()
	check := func(how string, rs []Result) {
		for _, r := range rs {
			for _, s := range []string{r.Name, r.Message, r.Fix} {
				if len(s) > maxField || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
					t.Errorf("%s: %s: %d bytes, not one printable line: %q", how, r.Name, len(s), s)
				}
			}
		}
	}
	check("the results", rs)
	var text, js bytes.Buffer
	if err := WriteText(&text, rs, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, rs); err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexFunc(text.Bytes(), func(r rune) bool { return r != '\n' && !strconv.IsPrint(r) }); i >= 0 || !utf8.Valid(text.Bytes()) {
		t.Errorf("WriteText wrote a byte a terminal acts on (at %d): %q", i, text.String())
	}
	var report struct{ Checks []Result }
	if err := json.Unmarshal(js.Bytes(), &report); err != nil || js.Len() > 16<<10 {
		t.Errorf("WriteJSON wrote %d bytes: %v", js.Len(), err)
	}
	if n := bytes.Count(js.Bytes(), []byte("\n")); n != 1 || !bytes.HasSuffix(js.Bytes(), []byte("\n")) {
		t.Errorf("WriteJSON wrote %d lines, want the one line of every --format json:\n%s", n, js.Bytes())
	}
	check("WriteJSON", report.Checks) // JSON's own \u001b would be ESC again here
}

// assertGone: the process whose pid a fake tool wrote to pidFile (if it
// did) is dead, or a zombie for init to reap.
func assertGone(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", pidFile, err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			return
		}
	}
	syscall.Kill(pid, syscall.SIGKILL) // not left for the next test
	t.Errorf("the child %d a tool left behind is still alive", pid)
}

// ExecRunner keeps what came before the stop, and the exit status of a
// command that printed too much is not the kill's.
func TestExecRunnerBounds(t *testing.T) {
	stdout, stderr, err := ExecRunner(context.Background(), Command{Path: "sh", Args: []string{"-c", "echo first >&2; exec yes"}})
	var oe *OutputError
	if !errors.As(err, &oe) || oe.Stream != "stdout" || !errors.Is(err, ErrTooMuchOutput) {
		t.Fatalf("err = %v, want stdout's OutputError", err)
	}
	if len(stdout) != MaxOutput || !strings.HasPrefix(stdout, "y\ny\n") || stderr != "first\n" {
		t.Errorf("kept %d bytes of stdout (%.10q), stderr %q; want %d and %q", len(stdout), stdout, stderr, MaxOutput, "first\n")
	}
	// Under the limit, all of it, and a normal exit.
	stdout, _, err = ExecRunner(context.Background(), Command{Path: "sh", Args: []string{"-c", "head -c 1000000 /dev/zero"}})
	if err != nil || len(stdout) != 1000000 {
		t.Errorf("got %d bytes, %v; want 1000000 and no error", len(stdout), err)
	}
}

// --format json is one value on one line, as the README promises: doctor's
// report once took a line per field (76 lines; issue 30, item 15).
func TestWriteJSONOneLine(t *testing.T) {
	rs := []Result{{Name: "profile", Status: OK, Message: "local is valid"}, {Name: "python", Status: Fail, Message: "no torch", Fix: "pip install torch"}}
	var js bytes.Buffer
	if err := WriteJSON(&js, rs); err != nil {
		t.Fatal(err)
	}
	want := `{"checks":[{"name":"profile","status":"ok","message":"local is valid","fix":""},` +
		`{"name":"python","status":"fail","message":"no torch","fix":"pip install torch"}]}` + "\n"
	if diff := cmp.Diff(want, js.String()); diff != "" {
		t.Errorf("WriteJSON (-want +got):\n%s", diff)
	}
}
