package integration

import (
	"bytes"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// srunExit2 is srun's line for task 0's exit 2.
const srunExit2 = `srun: error: node[12]: task 0: Exited with exit code 2`

// Rank 0 of the TCP backend with a MASTER_ADDR that is not its host's
// fails within seconds, saying what it resolved and why that cannot work,
// under every way a rank 0 starts (alone, batchkit run, srun); it used to
// wait its whole 5-minute rendezvous timeout. BATCHKIT_MASTER_ADDR_CHECK=0
// turns the check off; a wildcard MASTER_ADDR works for ranks on one host.
func TestMasterAddrNotHere(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	const (
		prefix     = `batchkit: collective: tcp backend: rendezvous: `
		unresolved = prefix + `MASTER_ADDR=no-such-host.invalid does not resolve: lookup no-such-host\.invalid( on [^ ]+)?: no such host`
		elsewhere  = prefix + `MASTER_ADDR=10\.255\.255\.1 resolves to 10\.255\.255\.1, which no interface of this host has: rank 0 must run on MASTER_ADDR's host \(this host is [^)]+\); if the address reaches this host through NAT, set BATCHKIT_MASTER_ADDR_CHECK=0`
	)
	bench := []string{bin, "bench", "--backend", "tcp", "--max-bytes", "64", "--iters", "1"}
	for _, c := range []struct {
		name    string
		cluster bool
		dns     bool // needs a resolver that says no-such-host.invalid does not exist
		env     []string
		argv    []string
		code    int    // -1: any failure (srun's is its tasks' highest)
		stderr  string // a regexp for all of stderr, one line each
	}{
		{name: "rank 0 alone, a name that does not resolve", dns: true,
			env: []string{"MASTER_ADDR=no-such-host.invalid"}, argv: bench, code: 2,
			stderr: `^` + unresolved + `\n$`},
		{name: "rank 0 alone, another host's address",
			env: []string{"MASTER_ADDR=10.255.255.1"}, argv: bench, code: 2,
			stderr: `^` + elsewhere + `\n$`},
		{name: "rank 0 alone, check off: waits for rank 1 as before",
			env:  []string{"MASTER_ADDR=10.255.255.1", "BATCHKIT_MASTER_ADDR_CHECK=0"},
			argv: slices.Concat(bench, []string{"--rendezvous-timeout", "1s"}), code: 1,
			stderr: `^` + strings.TrimSuffix(prefix, "rendezvous: ") + `rendezvous at 10\.255\.255\.1:[0-9]+ timed out after 1s: rank 1 of 2 never connected\n$`},
		{name: "batchkit run -n 2, a name that does not resolve", dns: true,
			argv: runWith("no-such-host.invalid", bench), code: 2,
			stderr: `(?m)^\[0\] ` + unresolved + `$`},
		{name: "batchkit run -n 2, another host's address",
			argv: runWith("10.255.255.1", bench), code: 2,
			stderr: `(?m)^\[0\] ` + elsewhere + `\nbatchkit: rank 0 exited with code 2; stopping 1 other rank\n`},
		{name: "batchkit run -n 2, a wildcard address",
			argv: runWith("0.0.0.0", bench), code: 0, stderr: `^$`},
		{name: "srun -N2 -n2, another host's address", cluster: true,
			argv: slices.Concat([]string{"srun", "-N2", "-n2", "--kill-on-bad-exit=1"}, rank0First("10.255.255.1", bench)), code: -1,
			// Both whole lines, in either order: srun writes its own line
			// while it forwards task 0's stderr (CI saw srun's first).
			stderr: `(?ms)^` + elsewhere + `$.*^` + srunExit2 + `$|^` + srunExit2 + `$.*^` + elsewhere + `$`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.cluster {
				needCluster(t)
			}
			if _, err := net.LookupHost("no-such-host.invalid"); c.dns && !notFound(err) {
				t.Skipf("the resolver does not say no-such-host.invalid does not exist: %v", err)
			}
			env := localEnv()
			if !c.cluster {
				env = append(env, "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2",
					"MASTER_PORT="+strconv.Itoa(freePort(t)), "BATCHKIT_JOB_TOKEN=masteraddr-test")
			}
			code, took, stderr := runExit(t, append(env, c.env...), c.argv)
			t.Logf("exit %d after %v", code, took.Round(time.Millisecond))
			if (code != c.code && !(c.code == -1 && code != 0)) || took > 10*time.Second {
				t.Errorf("exit %d after %v, want %d within 10 s", code, took, c.code)
			}
			if !regexp.MustCompile(c.stderr).MatchString(stderr) {
				t.Errorf("stderr does not match %s:\n%s", c.stderr, stderr)
			}
		})
	}
}

// runWith is batchkit run -n 2 of rank0First(addr, argv).
func runWith(addr string, argv []string) []string {
	return slices.Concat([]string{bin, "run", "-n", "2", "--"}, rank0First(addr, argv))
}

// rank0First runs argv with MASTER_ADDR=addr (in place of the one the
// launcher sets), the ranks but 0 two seconds late: what rank 0 says is
// then what the test sees, whatever the others meet at addr (here some
// addresses answer every port), before the launcher stops them.
func rank0First(addr string, argv []string) []string {
	script := `[ "${RANK:-$SLURM_PROCID}" = 0 ] || sleep 2; MASTER_ADDR=` + addr + ` exec "$@"`
	return slices.Concat([]string{"sh", "-c", script, "sh"}, argv)
}

func notFound(err error) bool {
	de, ok := err.(*net.DNSError)
	return ok && de.IsNotFound
}

// runExit runs argv in a process group of its own with the environment env
// and returns its exit code, how long it took and its stderr (stdout goes
// to the log). It gives up after a minute: the old behaviour took five.
func runExit(t *testing.T, env, argv []string) (int, time.Duration, string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	code, took := waitExit(t, cmd, time.Minute)
	if stdout.Len() > 0 {
		t.Logf("stdout:\n%s", stdout.String())
	}
	return code, took, stderr.String()
}
