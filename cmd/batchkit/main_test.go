package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// The CLI is tested as users run it: scripts in testdata/script run the real
// binary (this test binary re-executed as "batchkit") and check output and
// exit codes.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"batchkit": func() { os.Exit(Main(os.Args, os.Stdout, os.Stderr)) },
		// batchkit-root ROOT ARGS... is batchkit whose exec reads the
		// node's CPUs and GPUs under ROOT, a fake /proc, /sys and /dev.
		"batchkit-root": func() {
			app := newApp(os.Stdout, os.Stderr)
			for i, c := range app.Commands {
				if c.Name == "exec" {
					app.Commands[i] = execCommandAt(os.Args[1])
				}
			}
			os.Exit(runApp(app, append([]string{"batchkit"}, os.Args[2:]...), os.Stdout, os.Stderr))
		},
		// stop-undo-term is train's exit path: its signal handling undone,
		// a SIGTERM arrives before the last line is printed.
		"stop-undo-term": func() {
			_, undo := stopOnSignals(os.Stderr)
			undo()
			syscall.Kill(os.Getpid(), syscall.SIGTERM)
			time.Sleep(100 * time.Millisecond)
			fmt.Println("printed after SIGTERM")
			os.Exit(2)
		},
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		// testscript starts each script with a minimal environment, so no
		// launcher variables leak in even when the tests run inside a job.
		Dir: "testdata/script",
	})
}
