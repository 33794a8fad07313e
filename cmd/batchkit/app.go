package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/internal/clitree"
)

// version is set at build time: -ldflags "-X main.version=...".
var version = "dev"

// Exit codes. exec and run pass the child's code through instead.
const (
	exitOK      = 0
	exitFailure = 1 // a runtime failure
	exitUsage   = 2 // bad usage, configuration or input
)

// exitStatuses is the exit status table of docs/reference/cli.md ("## Exit
// status") and of the man page: every code batchkit exits with.
// TestExitCodesCoverDocs keeps the doc's copy the same, the numbers the constants', and a case
// in TestExitCodes for each row.
var exitStatuses = []struct{ Status, Meaning, From string }{
	{"0", "success", "every command"},
	{"1", "a runtime failure: a `doctor` check failed, a `bench` result was wrong, a sourced script failed or timed out, a launcher or `sbatch` did not answer", "every command"},
	{"2", "bad usage, configuration or input: an unknown command or flag, a bad flag value, a bad profile or host list, launcher variables that disagree; one `batchkit: ` line on stderr", "every command"},
	{"65", "diverged: the loss or the weights became NaN or infinite at a step (EX_DATAERR); the step is in the error line and in `--format json`'s `diverged`; the same command diverges again, so `run --max-restarts` does not restart it", "`train`"},
	{"75", "preempted: stopped by SIGUSR1 after writing a checkpoint (EX_TEMPFAIL): run the same command again to continue; `run --max-restarts` does not restart it, `sbatch --requeue` requeues it", "`train`"},
	{"126", "the command was found but cannot be run (no permission, a directory, a script without `#!`)", "`exec`, `run`"},
	{"127", "the command (or the MPI launcher) was not found", "`exec`, `run`, `mpirun`"},
	{"128+S", "a rank was killed by signal S (137 for SIGKILL); `train` stopped by a signal with no run to requeue: 143 on SIGTERM (a cancel or time limit; with `--checkpoint-dir` it checkpoints first), 138 on SIGUSR1 without `--checkpoint-dir` (nothing saved)", "`run`, `train`"},
	{"CMD's", "the program's own status, passed through without a message of batchkit's", "`exec`, `run`, `mpirun`, `sbatch --wait`"},
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:    "batchkit",
		Usage:   "launch distributed training on Slurm and MPI clusters",
		Version: version,
		Description: "batchkit reads the rank and topology of a process from Slurm, every MPI launcher or torchrun,\n" +
			"exports the torchrun contract (RANK, WORLD_SIZE, MASTER_ADDR ...) to any program, and expands\n" +
			"Slurm host lists.\n\n" +
			"Examples:\n" +
			"   batchkit run -n 2 -- python3 train.py\n" +
			"   batchkit sbatch -N 2 --ntasks-per-node 4 --dry-run -- python3 train.py\n" +
			"   srun -N2 -n8 batchkit exec -- python3 train.py\n" +
			"   batchkit doctor\n" +
			"   batchkit help COMMAND",
		Writer:    stdout,
		ErrWriter: stderr,
		// Completion is answered by Main (internal/clitree), never by urfave/cli,
		// which runs the action when the words hold a "--".
		// Errors are mapped to exit codes in one place, Main; never let
		// urfave/cli call os.Exit on its own.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   onUsageError,
		// --version prints the version alone, as the README says; urfave/cli's
		// own prints "batchkit version V".
		HideVersion: true,
		Flags:       []cli.Flag{&cli.BoolFlag{Name: "version", Aliases: []string{"v"}, Usage: "print the version alone ('batchkit version' adds the commit, Go and the backends)"}},
		Action:      appAction,
		Commands: []*cli.Command{
			envCommand(),
			execCommand(),
			runCommand(),
			sbatchCommand(),
			hostlistCommand(),
			profileCommand(),
			mpirunCommand(),
			envsetupCommand(),
			benchCommand(),
			doctorCommand(),
			trainCommand(),
			completionCommand(),
			versionCommand(),
			manCommand(),
		},
	}
}

// appAction is the app's: --version, else as unknownCommand.
func appAction(c *cli.Context) error {
	if c.Bool("version") {
		_, err := fmt.Fprintln(c.App.Writer, c.App.Version)
		return err
	}
	return unknownCommand(c)
}

// unknownCommand is the action of the app and of commands that only group
// subcommands: without arguments it shows the help; with an unknown
// command it is a usage error (urfave/cli would say "No help topic" and
// exit 3).
func unknownCommand(c *cli.Context) error {
	if !c.Args().Present() {
		if c.Command != nil && len(c.Command.Subcommands) > 0 {
			return cli.ShowSubcommandHelp(c)
		}
		return cli.ShowAppHelp(c)
	}
	where := "batchkit"
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		where = "batchkit " + c.Command.Name
	}
	return usagef("unknown command %q: see '%s --help'", c.Args().First(), where)
}

// oneLineUsageErrors gives every command the app's usage-error handler: a
// flag value that does not parse is one line on stderr and exit 2, not the
// whole help on stdout; and every group of subcommands unknownCommand.
func oneLineUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		if len(c.Subcommands) > 0 && c.Action == nil {
			c.Action = unknownCommand
		}
		if len(c.Subcommands) == 0 {
			// urfave/cli gives every command a "help" (alias "h")
			// subcommand: 'hostlist expand h' would show the help instead
			// of expanding the host h. --help stays.
			c.HideHelpCommand = true
		}
		if c.OnUsageError == nil {
			c.OnUsageError = onUsageError
		}
		oneLineUsageErrors(c.Subcommands)
	}
}

// Main runs the CLI and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return runApp(newApp(stdout, stderr), args, stdout, stderr)
}

// runApp is Main with the app given: tests run one whose exec reads a fake
// node (execCommandAt).
func runApp(app *cli.App, args []string, stdout, stderr io.Writer) int {
	oneLineUsageErrors(app.Commands)
	if words, ok := clitree.CompletionRequest(args); ok {
		for _, c := range clitree.Completions(app, words) {
			fmt.Fprintln(stdout, c)
		}
		return exitOK
	}
	err := app.Run(sbatchSpellings(app, args))
	code := exitCode(err)
	if err != nil && code != exitOK {
		if msg := errorLine(err); msg != "" {
			fmt.Fprintf(stderr, "batchkit: %s\n", msg)
		}
	}
	return code
}

// usageError marks bad usage, configuration or input: exit 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return &usageError{fmt.Errorf(format, a...)} }

// badInput wraps an error caused by the user's environment or arguments.
func badInput(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err}
}

// childExit carries a child's exit code through without a message of ours.
type childExit struct{ code int }

func (e *childExit) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func onUsageError(c *cli.Context, err error, _ bool) error { return &usageError{err} }

// exitCode is the one place that maps an error to an exit code.
func exitCode(err error) int {
	var (
		ue *usageError
		ce *childExit
		ee *exec.ExitError
		ec cli.ExitCoder
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ee):
		return ee.ExitCode()
	case errors.As(err, &ec) && ec.ExitCode() == 3 && strings.HasPrefix(err.Error(), "No help topic"):
		return exitUsage // urfave/cli's 'help nosuch'
	case errors.As(err, &ec):
		return ec.ExitCode()
	case isFlagError(err):
		return exitUsage
	}
	return exitFailure
}

// isFlagError recognises urfave/cli's and flag's parse errors, which are not
// typed; they are usage errors.
func isFlagError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"flag provided but not defined", "invalid value", "flag needs an argument", "Required flag", "Required flags"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// errorLine is what Main prints for err: one line, no stack.
func errorLine(err error) string {
	var ce *childExit
	if errors.As(err, &ce) {
		return ""
	}
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

// hostname for the single-node host list; detection itself stays pure.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}
