package doctor

import (
	"context"
	"net"
	"os"
	"runtime"
	"strconv"

	"github.com/batchkit/batchkit/envsetup"
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
		LibDirs:   DefaultLibDirs,
	}
}

// EnvSource sets up penv with envsetup, in real bash started with
// env.Environ(), then env.intel_wheels' variables, the way batchkit mpirun
// and envsetup do.
func EnvSource(ctx context.Context, env *Env, penv profile.Env) (envsetup.Changes, error) {
	environ := env.Environ()
	wheels, err := penv.Wheels(environ)
	if err != nil {
		return envsetup.Changes{}, err
	}
	return envsetup.Runner{Timeout: env.Timeout}.SourceWithWheels(ctx, environ, penv.Scripts(), penv.OneCCLBindings, penv.Python, wheels)
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
