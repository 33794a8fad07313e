package mpilaunch

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/mpirun"
)

// Run runs the launch: it writes a generated hostfile to a temporary file
// (removed afterwards), starts the launcher with this process's
// environment (envsetup.LauncherEnviron: the job token goes there, never
// into argv, which every user of the machine can read) and waits. Signals
// and exit codes follow package launch: the launcher's status is the
// code, and a signal from sigs is forwarded to the launcher, which takes
// its ranks down in its own way.
func Run(ctx context.Context, p Plan, io launch.IO, sigs <-chan os.Signal) (int, error) {
	if !p.Found {
		return 127, &launch.StartError{Code: 127, Err: mpirun.NotFound(p.Spec.Binary, p.Spec.Flavor, p.Spec.Launcher)}
	}
	env, err := envsetup.LauncherEnviron(os.Environ(), p.Spec.ForwardEnv, envsetup.NewToken)
	if err != nil {
		return 1, err
	}
	spec := p.Spec
	if p.Hostfile != "" {
		name, err := writeHostfile(p.Hostfile)
		if err != nil {
			return 1, err
		}
		defer os.Remove(name)
		spec.Hostfile = name
	}
	argv, err := mpirun.Command(spec)
	if err != nil {
		return 2, launch.Bad(err)
	}
	return runArgv(ctx, argv, env, io, sigs)
}

// writeHostfile writes text to a new temporary file and returns its name.
func writeHostfile(text string) (string, error) {
	f, err := os.CreateTemp("", "batchkit-hostfile-")
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// runArgv runs argv with env (nil: this process's) to completion. The
// launcher stays in this process group so that it can read a terminal
// (launch.RunChild).
func runArgv(ctx context.Context, argv, env []string, io launch.IO, sigs <-chan os.Signal) (int, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		err = launch.Started(err)
		return err.(*launch.StartError).Code, err
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Stdin: io.Stdin, Stdout: io.Stdout, Stderr: io.Stderr}
	code, err := launch.RunChild(ctx, cmd, sigs)
	if se, ok := err.(*launch.StartError); ok {
		se.Err = fmt.Errorf("%s: %w", argv[0], se.Err)
	}
	return code, err
}
