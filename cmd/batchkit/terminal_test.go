package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/mattn/go-isatty"
)

// fakeTerminal is a buffer that says it is a terminal (isTerminal).
type fakeTerminal struct{ bytes.Buffer }

func (*fakeTerminal) IsTerminal() bool { return true }

// Colour only on a terminal, and never there with NO_COLOR set (to
// anything but ""); --color always is the user's explicit request and wins.
func TestColorOnlyOnATerminalWithoutNoColor(t *testing.T) {
	doctor := []string{"doctor", "--profile", "local", "--python", "/nonexistent/python"} // a FAIL, in red
	run := []string{"run", "-n", "1", "--", "echo", "hi"}                                 // a [0] prefix
	tests := []struct {
		name     string
		terminal bool
		noColor  string
		args     []string
		color    bool
	}{
		{"doctor on a terminal", true, "", doctor, true},
		{"doctor on a terminal, NO_COLOR=1", true, "1", doctor, false},
		{"doctor on a terminal, NO_COLOR=0 is set too", true, "0", doctor, false},
		{"doctor to a file", false, "", doctor, false},
		{"run on a terminal", true, "", run, true},
		{"run on a terminal, NO_COLOR=1", true, "1", run, false},
		{"run to a file", false, "", run, false},
		{"run --color always, NO_COLOR=1", false, "1", append([]string{"run", "--color", "always"}, run[1:]...), true},
		{"run --color never on a terminal", true, "", append([]string{"run", "--color", "never"}, run[1:]...), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NO_COLOR", tt.noColor)
			var stdout interface {
				io.Writer
				fmt.Stringer
			} = &bytes.Buffer{}
			if tt.terminal {
				stdout = &fakeTerminal{}
			}
			var stderr bytes.Buffer
			Main(append([]string{"batchkit"}, tt.args...), stdout, &stderr)
			if got := strings.Contains(stdout.String(), "\x1b["); got != tt.color {
				t.Errorf("escapes in the output: %v, want %v; stdout %q, stderr %q", got, tt.color, stdout.String(), stderr.String())
			}
		})
	}
}

func TestUseColor(t *testing.T) {
	tests := []struct {
		name    string
		w       io.Writer
		noColor string
		want    bool
	}{
		{"terminal", &fakeTerminal{}, "", true},
		{"terminal, NO_COLOR", &fakeTerminal{}, "1", false},
		{"buffer", &bytes.Buffer{}, "", false},
	}
	for _, tt := range tests {
		getenv := func(k string) string {
			if k == "NO_COLOR" {
				return tt.noColor
			}
			return ""
		}
		if got := useColor(tt.w, getenv); got != tt.want {
			t.Errorf("%s: useColor = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// openPty opens a new pseudo terminal, as Open MPI does for each rank's
// stdout: neither end becomes this process's controlling terminal.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo terminals: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	var unlock int32
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlockpt: %v", e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("ptsname: %v", e)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// A pseudo terminal that is not the process's controlling terminal is not
// the user's: Open MPI's ranks write to one even when mpirun's output is a
// batch log (18 MB a minute of progress bar went there).
func TestIsTerminalOnlyTheControllingOne(t *testing.T) {
	_, slave := openPty(t)
	if isTerminal(slave) {
		t.Errorf("isTerminal(%s) = true for a pseudo terminal that controls nobody", slave.Name())
	}
	if isTerminal(os.Stderr) && !isatty.IsTerminal(os.Stderr.Fd()) {
		t.Errorf("isTerminal(stderr) = true, and stderr is no terminal")
	}
}

// train draws its bar on the terminal that controls it (a shell's, srun
// --pty's) and not on one that does not (Open MPI's for a rank): the test
// binary, run as batchkit, trains with stdout on a new pseudo terminal,
// once as its controlling terminal and once not.
func TestTrainBarOnlyOnTheControllingTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("trains")
	}
	for _, tc := range []struct {
		name string
		ctty bool
		bar  bool
	}{
		{"controlling terminal (a shell, srun --pty)", true, true},
		{"a terminal that controls nobody (Open MPI's)", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master, slave := openPty(t)
			cmd := exec.Command(os.Args[0], "train", "--epochs", "1")
			cmd.Args[0] = "batchkit" // testscript.Main runs Main for it (main_test.go)
			cmd.Env = append(os.Environ(), "RANK=", "WORLD_SIZE=", "OMPI_COMM_WORLD_RANK=", "OMPI_COMM_WORLD_SIZE=",
				"PMI_RANK=", "PMI_SIZE=", "PMIX_RANK=", "SLURM_JOB_ID=", "SLURM_STEP_ID=")
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if tc.ctty {
				cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, 0
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			out, _ := io.ReadAll(master) // EIO once the child and its slave are gone
			if err := cmd.Wait(); err != nil {
				t.Fatalf("train: %v\n%s", err, out)
			}
			text := strings.ReplaceAll(string(out), "\r\n", "\n")
			if !strings.Contains(text, "test accuracy") {
				t.Fatalf("no summary in %q", text)
			}
			if got := strings.Contains(text, "\r"); got != tc.bar {
				t.Errorf("bar drawn: %v, want %v; output:\n%q", got, tc.bar, text)
			}
		})
	}
}

func TestControllingTTY(t *testing.T) {
	for _, tc := range []struct {
		name string
		stat string
		want uint64
		ok   bool
	}{
		{"a shell on /dev/pts/0", "4242 (bash) S 4241 4242 4242 34816 4250 4194304 ...", 34816, true},
		{"none (a batch job)", "17 (batchkit) S 1 17 17 0 -1 4194560", 0, true},
		{"a name with spaces and parentheses", "9 (a) b (c)) R 1 9 9 34817 9 0", 34817, true},
		{"cut short", "9 (x) R 1 9", 0, false},
		{"no name", "garbage", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := controllingTTY([]byte(tc.stat))
			if diff := cmp.Diff([2]any{tc.want, tc.ok}, [2]any{got, ok}); diff != "" {
				t.Errorf("controllingTTY (-want +got):\n%s", diff)
			}
		})
	}
}
