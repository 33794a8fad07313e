package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/internal/mdtable"
	"github.com/batchkit/batchkit/launch"
)

// exitCase is one run of Main and the exit code it must give; row is the
// status column of docs/reference/cli.md's exit status table the case stands for.
type exitCase struct {
	name string
	row  string
	env  map[string]string
	args []string
	code int
	// signal, when set, is sent to this process until Main returns (train
	// stops on it); the test catches it too, so that one sent before train
	// watches for it cannot kill the test (SIGTERM would).
	signal os.Signal
}

// Exit codes are part of the interface: 2 for usage and bad input, 1 for
// runtime failures, the child's own code for exec (testdata/script/exec.txtar:
// a successful exec would replace this test binary). Every row of
// docs/reference/cli.md's table has a case (TestExitCodesCoverDocs).
var exitCases = []exitCase{
	{name: "help", row: "0", args: []string{"--help"}, code: 0},
	{name: "no command: help", row: "0", args: nil, code: 0},
	{name: "unknown command", row: "2", args: []string{"bogus"}, code: 2},
	{name: "unknown subcommand", row: "2", args: []string{"profile", "bogus"}, code: 2},
	{name: "group without subcommand: help", row: "0", args: []string{"hostlist"}, code: 0},
	{name: "help of an unknown topic", row: "2", args: []string{"help", "nosuch"}, code: 2},
	{name: "help of a group's unknown topic", row: "2", args: []string{"profile", "help", "nosuch"}, code: 2},
	{name: "a host named h is a host", row: "0", args: []string{"hostlist", "expand", "h", "n1"}, code: 0},
	{name: "completion with an extra argument", row: "2", args: []string{"completion", "bash", "extra"}, code: 2},
	{name: "unknown flag", row: "2", args: []string{"env", "--bogus"}, code: 2},
	{name: "unknown format", row: "2", args: []string{"env", "--format", "xml"}, code: 2},
	{name: "bad variable", row: "2", env: map[string]string{"PMI_RANK": "x", "PMI_SIZE": "2"}, args: []string{"env"}, code: 2},
	{name: "conflict", row: "2", env: map[string]string{"OMPI_COMM_WORLD_RANK": "1", "PMIX_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}, args: []string{"env"}, code: 2},
	{name: "bad hostlist", row: "2", args: []string{"hostlist", "expand", "n[1-"}, code: 2},
	{name: "exec without command", row: "2", args: []string{"exec"}, code: 2},
	{name: "exec not found", row: "127", args: []string{"exec", "--", "/nonexistent/prog"}, code: 127},
	{name: "exec not executable", row: "126", args: []string{"exec", "--", "/etc/hostname"}, code: 126},
	{name: "exec a directory", row: "126", args: []string{"exec", "--", "/tmp"}, code: 126},
	{name: "run a directory", row: "126", args: []string{"run", "-n", "1", "--", "/tmp"}, code: 126},
	{name: "run not found", row: "127", args: []string{"run", "-n", "1", "--", "/nonexistent/prog"}, code: 127},
	{name: "mpirun's launcher not found", row: "127", args: []string{"mpirun", "--flavor", "openmpi", "--mpirun", "/nonexistent/mpirun", "-n", "1", "--", "true"}, code: 127},
	{name: "run with negative --max-restarts", row: "2", args: []string{"run", "-n", "1", "--max-restarts", "-1", "--", "true"}, code: 2},
	{name: "run with non-numeric --max-restarts", row: "2", args: []string{"run", "-n", "1", "--max-restarts", "x", "--", "true"}, code: 2},
	{name: "run with --max-restarts", row: "0", args: []string{"run", "-n", "1", "--max-restarts", "1", "--", "true"}, code: 0},
	{name: "a sourced script fails", row: "1", args: []string{"envsetup", "--source", "testdata/exitcode/fails.sh"}, code: 1},
	{name: "a sourced script is missing", row: "2", args: []string{"envsetup", "--source", "testdata/exitcode/nosuch.sh"}, code: 2},
	{name: "a rank's own status", row: "CMD's", args: []string{"run", "-n", "1", "--", "sh", "-c", "exit 7"}, code: 7},
	{name: "a rank killed by SIGKILL", row: "128+S", args: []string{"run", "-n", "1", "--", "sh", "-c", "kill -KILL $$"}, code: 128 + int(syscall.SIGKILL)},
	{name: "train diverging", row: "65", args: []string{"train", "--epochs", "1", "--batch-size", "1"}, code: 65},
	{name: "train stopped by SIGUSR1", row: "75", args: []string{"train", "--epochs", "1000", "--checkpoint-dir", tempDirArg}, code: 75, signal: syscall.SIGUSR1},
	// Only a preemption that saved something asks for a requeue: a cancel or
	// time limit (SIGTERM) never does, nor a SIGUSR1 with nothing saved.
	{name: "train stopped by SIGTERM", row: "128+S", args: []string{"train", "--epochs", "1000", "--checkpoint-dir", tempDirArg}, code: 143, signal: syscall.SIGTERM},
	{name: "train stopped by SIGUSR1 without --checkpoint-dir", row: "128+S", args: []string{"train", "--epochs", "1000"}, code: 138, signal: syscall.SIGUSR1},
	{name: "version", row: "0", args: []string{"version"}, code: 0},
}

func TestExitCodes(t *testing.T) {
	for _, tt := range exitCases {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_JOB_ID", "SLURM_STEP_ID",
				"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALRANKID", "MASTER_ADDR", "MASTER_PORT"} {
				t.Setenv(k, "")
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			tt.args = slices.Clone(tt.args)
			for i, a := range tt.args {
				if a == tempDirArg {
					tt.args[i] = t.TempDir()
				}
			}
			var stdout, stderr bytes.Buffer
			code := mainSignalled(t, tt, &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			if code != 0 {
				lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
				if len(lines) != 1 || !strings.HasPrefix(lines[0], "batchkit: ") {
					t.Errorf("stderr should be one 'batchkit: ' line, got %q", stderr.String())
				}
			}
		})
	}
}

// tempDirArg in a case's arguments is replaced by a new temporary directory.
const tempDirArg = "{tempdir}"

// mainSignalled runs Main, sending tt.signal to this process every 50 ms
// for its first 250 ms, or until it returns, when the case has one: train
// may not watch for it yet when the first comes, and a second SIGTERM half
// a second after the first would end it at once.
func mainSignalled(t *testing.T, tt exitCase, stdout, stderr *bytes.Buffer) int {
	args := append([]string{"batchkit"}, tt.args...)
	if tt.signal == nil {
		return Main(args, stdout, stderr)
	}
	caught := make(chan os.Signal, 1) // keeps the signal from killing the test
	signal.Notify(caught, tt.signal)
	defer signal.Stop(caught)
	done := make(chan int)
	go func() { done <- Main(args, stdout, stderr) }()
	start := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case code := <-done:
			return code
		case <-tick.C:
			if time.Since(start) < 250*time.Millisecond {
				syscall.Kill(os.Getpid(), tt.signal.(syscall.Signal))
			}
		}
	}
}

// docExitCodes is the code behind each numbered row of docs/reference/cli.md's
// exit status table; the other rows are the program's own status.
var docExitCodes = map[string]int{
	"0":   exitOK,
	"1":   exitFailure,
	"2":   exitUsage,
	"65":  exitDiverged,
	"75":  exitPreempted,
	"126": launch.StartCode(os.ErrPermission),
	"127": launch.StartCode(exec.ErrNotFound),
}

// docs/reference/cli.md's table is exitStatuses, row for row; its numbered statuses
// are the code's constants; and each row has a case above with its code.
func TestExitCodesCoverDocs(t *testing.T) {
	got, err := docExitTable()
	if err != nil {
		t.Fatal(err)
	}
	var want [][3]string
	var rows []string
	for _, e := range exitStatuses {
		want = append(want, [3]string{e.Status, e.Meaning, e.From})
		rows = append(rows, e.Status)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/reference/cli.md's exit status table (+) differs from exitStatuses (-):\n%s", diff)
	}
	var numbered []string
	for _, row := range rows {
		n, err := strconv.Atoi(row)
		if err != nil {
			continue
		}
		numbered = append(numbered, row)
		if code, ok := docExitCodes[row]; ok && code != n {
			t.Errorf("exit status %d is documented, the code's constant is %d", n, code)
		}
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(docExitCodes)), slices.Sorted(slices.Values(numbered))); diff != "" {
		t.Errorf("documented exit statuses (+) differ from the code's constants (-):\n%s", diff)
	}
	for _, row := range rows {
		i := slices.IndexFunc(exitCases, func(c exitCase) bool { return c.row == row })
		if i < 0 {
			t.Errorf("exit status %q has no case in exitCases", row)
			continue
		}
		if code, ok := docExitCodes[row]; ok && exitCases[i].code != code {
			t.Errorf("case %q stands for exit status %s but expects %d", exitCases[i].name, row, exitCases[i].code)
		}
	}
	for _, c := range exitCases {
		if !slices.Contains(rows, c.row) {
			t.Errorf("case %q names exit status %q, which is not documented", c.name, c.row)
		}
	}
}

// docExitTable is the table under "## Exit status" of docs/reference/cli.md:
// status, meaning, from.
func docExitTable() ([][3]string, error) {
	b, err := os.ReadFile("../../docs/reference/cli.md")
	if err != nil {
		return nil, err
	}
	table, err := mdtable.Under(string(b), "## Exit status", 3)
	if err != nil {
		return nil, fmt.Errorf("docs/reference/cli.md: %w", err)
	}
	var rows [][3]string
	for _, c := range table {
		rows = append(rows, [3]string(c))
	}
	return rows, nil
}
