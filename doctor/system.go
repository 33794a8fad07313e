package doctor

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	"github.com/batchkit/batchkit/envsetup"
	"github.com/batchkit/batchkit/internal/cmdgroup"
	"github.com/batchkit/batchkit/profile"
)

// System is the Env of this machine: real commands, bash, sockets.
func System(getenv func(string) string, hostname string) *Env {
	return &Env{
		Getenv:    getenv,
		Environ:   os.Environ,
		LookPath:  lookPath,
		Run:       ExecRunner,
		Source:    EnvSource,
		Listen:    listen,
		SameFile:  sameFile,
		NumCPU:    runtime.NumCPU(), // Linux: the CPU affinity mask's count
		Hostname:  hostname,
		SysPython: "/usr/bin/python3",
		Timeout:   DefaultTimeout,
	}
}

// ExecRunner runs c in its own process group and kills the whole group
// when ctx is done: a wrapper script's sleeping child would otherwise keep
// the pipes open and Wait blocked past the timeout.
func ExecRunner(ctx context.Context, c Command) (string, string, error) {
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env = c.Env // nil: this process's
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmdgroup.Bound(cmd, 500*time.Millisecond)
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// EnvSource sets up penv with envsetup, in real bash started with
// env.Environ(), the way batchkit mpirun and envsetup do.
func EnvSource(ctx context.Context, env *Env, penv profile.Env) (envsetup.Changes, error) {
	var ss []envsetup.Script
	for _, s := range penv.Source {
		ss = append(ss, envsetup.Script{Path: s.Script, Args: s.Args})
	}
	return envsetup.Runner{Timeout: env.Timeout}.SourceEnv(ctx, env.Environ(), ss, penv.OneCCLBindings, penv.Python)
}

func listen(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}
