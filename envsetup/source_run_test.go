package envsetup

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// baseEnv is a small, known environment for the scripts: no oneAPI in it.
func baseEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed: the scripts are sourced by real bash")
	}
	return append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8"}, extra...)
}

func abs(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func source(t *testing.T, environ []string, scripts ...Script) (Changes, error) {
	t.Helper()
	return Runner{Timeout: 10 * time.Second}.Source(context.Background(), environ, scripts)
}

// The oneAPI and oneCCL stand-ins: setvars.sh with its arguments, then
// oneCCL's vars.sh, like the intel-oneccl profile.
func TestSourceOneAPI(t *testing.T) {
	root := abs(t, "oneapi")
	env := baseEnv(t, "LD_LIBRARY_PATH=/usr/lib/extra")
	got, err := source(t, env,
		Script{Path: root + "/setvars.sh", Args: []string{"--force"}},
		Script{Path: root + "/ccl/latest/env/vars.sh", Args: []string{"--ccl-configuration=cpu"}})
	if err != nil {
		t.Fatal(err)
	}
	want := Changes{
		Set: map[string]string{
			"SETVARS_COMPLETED": "1",
			"CMPLR_ROOT":        root + "/compiler/latest",
			"I_MPI_ROOT":        root + "/mpi/latest",
			"CCL_ROOT":          root + "/ccl/latest",
			"CCL_CONFIGURATION": "cpu",
			"PATH":              root + "/mpi/latest/bin:" + root + "/compiler/latest/bin:/usr/local/bin:/usr/bin:/bin",
			"LD_LIBRARY_PATH": root + "/ccl/latest/lib/cpu:" + root + "/mpi/latest/lib:" + root + "/compiler/latest/lib:" +
				root + "/ccl/latest/lib/cpu_gpu_dpcpp:/usr/lib/extra",
			"LIBRARY_PATH": root + "/ccl/latest/lib/cpu:" + root + "/ccl/latest/lib/cpu_gpu_dpcpp",
			"CPATH":        root + "/ccl/latest/include",
		},
		Unset: []string{},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}

	// Sourcing again in the environment it produced changes nothing: the
	// prepended directories are there already.
	again, err := source(t, Apply(env, got),
		Script{Path: root + "/setvars.sh", Args: []string{"--force"}},
		Script{Path: root + "/ccl/latest/env/vars.sh", Args: []string{"--ccl-configuration=cpu"}})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Empty() {
		t.Errorf("second sourcing changed %+v, want nothing", again)
	}

	// Without --force, setvars.sh refuses to run again: non-zero, and its
	// reason (on stdout) is in the error.
	_, err = source(t, Apply(env, got), Script{Path: root + "/setvars.sh"})
	var se *SourceError
	if !errors.As(err, &se) || se.Code != 3 || !strings.Contains(se.Error(), "--force") || se.Script != root+"/setvars.sh" {
		t.Errorf("err = %v, want setvars.sh's refusal, exit 3, mentioning --force", err)
	}
}

// --config=FILE excludes a component; arguments setvars.sh does not know
// reach the components' vars.sh.
func TestSourceSetvarsConfig(t *testing.T) {
	root := abs(t, "oneapi")
	cfg := filepath.Join(t.TempDir(), "config.txt")
	if err := os.WriteFile(cfg, []byte("mpi=exclude\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := source(t, baseEnv(t), Script{Path: root + "/setvars.sh", Args: []string{"--config=" + cfg, "--ccl-configuration=cpu"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Set["I_MPI_ROOT"]; ok {
		t.Errorf("I_MPI_ROOT set, but the config excludes mpi")
	}
	if got.Set["CCL_CONFIGURATION"] != "cpu" {
		t.Errorf("CCL_CONFIGURATION = %q, want cpu (passed on by setvars.sh)", got.Set["CCL_CONFIGURATION"])
	}
}

func TestSourceScripts(t *testing.T) {
	s := func(name string, args ...string) Script { return Script{Path: abs(t, "scripts/"+name), Args: args} }
	for _, c := range []struct {
		name    string
		environ []string
		scripts []Script
		want    Changes
	}{
		{"stdout is not the environment", nil, []Script{s("chatty.sh")},
			Changes{Set: map[string]string{"CHATTY": "yes"}, Unset: []string{}}},
		{"values a shell could misread", nil, []Script{s("quoting.sh")},
			Changes{Set: map[string]string{
				"Q_SINGLE": "it's", "Q_DOUBLE": `say "hi"`, "Q_DOLLAR": "$HOME and ${PATH}", "Q_BACKQUOTE": "`touch PWNED`",
				"Q_BACKSLASH": `a\b\\c`, "Q_NEWLINE": "line one\nline two", "Q_EMPTY": "", "Q_EQUALS": "a=b=c",
			}, Unset: []string{}}},
		{"unset and changed", []string{"GOES_AWAY=1", "CHANGED=old"}, []Script{s("unset.sh")},
			Changes{Set: map[string]string{"CHANGED": "new old"}, Unset: []string{"GOES_AWAY"}}},
		{"arguments are the positional parameters, in order", nil,
			[]Script{s("args.sh", "a b", "$HOME", ""), s("chatty.sh")},
			Changes{Set: map[string]string{"ARGC": "3", "ARGS": "a b $HOME ", "CHATTY": "yes"}, Unset: []string{}}},
		{"no arguments: none inherited", nil, []Script{s("chatty.sh", "x", "y"), s("args.sh")},
			Changes{Set: map[string]string{"ARGC": "0", "ARGS": "", "CHATTY": "yes"}, Unset: []string{}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := source(t, baseEnv(t, c.environ...), c.scripts...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSourceErrors(t *testing.T) {
	dir := t.TempDir()
	unreadable := filepath.Join(dir, "unreadable.sh")
	if err := os.WriteFile(unreadable, []byte("export X=1\n"), 0o000); err != nil {
		t.Fatal(err)
	}
	s := func(name string) Script { return Script{Path: abs(t, "scripts/"+name)} }
	binaryFail := filepath.Join(dir, "binary.sh")
	if err := os.WriteFile(binaryFail, []byte("printf '\\033]0;pwned\\a\\n'\nhead -c 200000 /dev/zero\nreturn 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		scripts []Script
		script  string // the script the error names
		code    int
		is      error
		says    []string
	}{
		{"missing", []Script{{Path: filepath.Join(dir, "nosuch.sh")}}, filepath.Join(dir, "nosuch.sh"), -1, os.ErrNotExist, []string{"no such file"}},
		{"a directory", []Script{{Path: dir}}, dir, -1, nil, []string{"is a directory"}},
		{"fails, after one that worked", []Script{s("chatty.sh"), s("fail.sh")}, abs(t, "scripts/fail.sh"), 4, nil,
			[]string{"exit 4", "starting | ERROR: the runtime is not installed in /nonexistent"}},
		{"exits the shell", []Script{s("exits.sh")}, abs(t, "scripts/exits.sh"), 0, ErrExited, []string{"exited the shell"}},
		// Its output is quoted escaped and cut: 200 KB of NULs and an
		// escape sequence do not make the error line.
		{"fails after binary output", []Script{{Path: binaryFail}}, binaryFail, 3, nil,
			[]string{`exit 3): \x1b]0;pwned\a | \x00\x00`, " more bytes]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := source(t, baseEnv(t), c.scripts...)
			var se *SourceError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v (changes %+v), want a *SourceError", err, got)
			}
			if se.Script != c.script || se.Code != c.code {
				t.Errorf("script %s, code %d; want %s, %d", se.Script, se.Code, c.script, c.code)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("err = %v, want one that is %v", err, c.is)
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("err = %q, want it to say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "\n") || len(err.Error()) > 2<<10 {
				t.Errorf("err = %.500q (%d bytes): want one line of at most 2 KiB", err, len(err.Error()))
			}
			if !got.Empty() {
				t.Errorf("a failed sourcing returned changes %+v", got)
			}
		})
	}
	if os.Geteuid() != 0 { // root reads any file
		if _, err := source(t, baseEnv(t), Script{Path: unreadable}); !errors.Is(err, os.ErrPermission) {
			t.Errorf("unreadable: err = %v, want permission denied", err)
		}
	}
}

// A script that hangs is killed with its children at the timeout.
func TestSourceTimeout(t *testing.T) {
	start := time.Now()
	_, err := Runner{Timeout: time.Second}.Source(context.Background(), baseEnv(t), []Script{{Path: abs(t, "scripts/slow.sh")}})
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "slow.sh") || !strings.Contains(err.Error(), "1s") {
		t.Errorf("err = %v, want a timeout after 1s naming slow.sh", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s: the timeout did not end the sourcing", d)
	}
	// The background sleep of the script died with the group.
	out, _ := exec.Command("pgrep", "-f", "sleep 317").Output()
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("processes of the script still run: %s", out)
	}
}

// A timeout too short for bash to start is a timeout, not a nil-pointer
// panic (issue 30, item 12: --timeout 1ns); a negative one is refused, not
// taken for the default.
func TestSourceTinyTimeouts(t *testing.T) {
	script := []Script{{Path: abs(t, "scripts/args.sh")}}
	for _, tt := range []struct {
		name    string
		timeout time.Duration
		want    string
	}{
		{"1ns: the deadline passes before bash starts", time.Nanosecond, "args.sh failed: timed out after 1ns"},
		{"-1s", -time.Second, "invalid timeout -1s: want a positive duration"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := Runner{Timeout: tt.timeout}.Source(context.Background(), baseEnv(t), script)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Source = %v, %v; want an error containing %q", ch, err, tt.want)
			}
		})
	}
}

func TestCheckTimeout(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{time.Nanosecond, ""},
		{time.Minute, ""},
		{0, "invalid --timeout 0s: want a positive duration (such as 60s or 2m)"},
		{-time.Second, "invalid --timeout -1s: want a positive duration (such as 60s or 2m)"},
	} {
		got := ""
		if err := CheckTimeout("--timeout", tt.d); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("CheckTimeout(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// The temporary directory's failure names the directory and what to do,
// by its cause.
func TestTempDirError(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{syscall.ENOSPC, "sourcing writes the environment to the temporary directory /scratch ($TMPDIR): no space left on device: free space there or point TMPDIR at another directory"},
		{syscall.EDQUOT, "sourcing writes the environment to the temporary directory /scratch ($TMPDIR): disk quota exceeded: free space there or point TMPDIR at another directory"},
		{syscall.ENOENT, "sourcing writes the environment to the temporary directory /scratch ($TMPDIR): no such file or directory: point TMPDIR at a writable directory"},
	} {
		if got := (&TempDirError{Dir: "/scratch", Err: tt.err}).Error(); got != tt.want {
			t.Errorf("TempDirError{%v} = %q\nwant %q", tt.err, got, tt.want)
		}
	}
}

// A TMPDIR that does not exist is named as such, not as the script failing.
func TestSourceTempDirMissing(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "gone"))
	_, err := Runner{}.Source(context.Background(), baseEnv(t), []Script{{Path: abs(t, "scripts/args.sh")}})
	var te *TempDirError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "gone ($TMPDIR): no such file or directory") {
		t.Errorf("Source = %v, want a TempDirError naming the missing TMPDIR", err)
	}
}
