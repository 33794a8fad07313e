package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const tokenVar = "BATCHKIT_JOB_TOKEN"

// tokenRank is the rank program: it reports the job token in its
// environment and how many processes' command lines hold it, reading /proc
// itself so that the token is in no argument of its own. seen counts the
// command lines naming MASTER_PORT, which the launcher's does (-x or
// -genv): proof that the scan reads the launcher's argv. remote is
// FAKE_REMOTE, set only by fakeRemoteShell.
const tokenRank = `import glob, os
tok = os.environb.get(b"BATCHKIT_JOB_TOKEN", b"")
leaks, seen = [], 0
for p in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        with open(p, "rb") as f:
            b = f.read()
    except OSError:
        continue
    seen += b"MASTER_PORT" in b
    if tok and tok in b:
        leaks.append(p + " " + b.replace(b"\0", b" ").decode(errors="replace"))
for l in leaks:
    print("BKT-LEAK", l, flush=True)
print("BKT-TOKEN rank=%s token=%s leaks=%d seen=%d remote=%s END" % (os.environ.get("RANK", "?"),
    tok.decode() or "-", len(leaks), seen, os.environ.get("FAKE_REMOTE", "-")), flush=True)`

var tokenLine = regexp.MustCompile(`BKT-TOKEN rank=(\d+) token=(\S+) leaks=(\d+) seen=(\d+) remote=(\S+) END`)

// fakeRemoteShell stands in for ssh to another node: it drops the host and
// runs the command in a clean environment, so a rank started through it
// has only what the launcher forwarded, as on a real remote node.
const fakeRemoteShell = `#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
shift
exec env -i PATH=/usr/bin:/bin HOME=/ FAKE_REMOTE=1 sh -c "$*"
`

// tokenEnv is localEnv without the job token, plus set.
func tokenEnv(set ...string) []string {
	var env []string
	for _, kv := range localEnv() {
		if !strings.HasPrefix(kv, tokenVar+"=") {
			env = append(env, kv)
		}
	}
	return append(env, set...)
}

// runEnv is runLocal with the environment env.
func runEnv(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %q: %v\nstdout:\n%s\nstderr:\n%s", name, args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// `batchkit mpirun` hands every rank the job token through the launcher's
// environment: all ranks agree on it, each launch gets a new one unless one
// is set, and it is on no command line of any process while the ranks run,
// nor in the --dry-run output. On a fake remote node with a clean
// environment the token still arrives, by the launcher's own forwarding
// (Open MPI -x NAME, Hydra's default of passing its whole environment).
func TestMpirunToken(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real MPI launchers")
	}
	needTool(t, "python3")
	remoteShell := filepath.Join(t.TempDir(), "fake-ssh")
	if err := os.WriteFile(remoteShell, []byte(fakeRemoteShell), 0o755); err != nil {
		t.Fatal(err)
	}
	// How each flavor starts ranks through remoteShell on host "fakehost".
	remoteArgs := map[string][]string{
		"openmpi": {"--mpi-arg", "--mca", "--mpi-arg", "plm_rsh_agent", "--mpi-arg", remoteShell},
		"mpich":   {"--bootstrap", "rsh", "--mpi-arg", "-bootstrap-exec", "--mpi-arg", remoteShell},
	}
	// What --dry-run shows of the token: its name where the launcher needs
	// it, never its value.
	dryRunNames := map[string]string{"openmpi": " -x BATCHKIT_JOB_TOKEN ", "mpich": ""}

	for _, f := range mpirunFlavors {
		t.Run(f.flavor, func(t *testing.T) {
			needTool(t, f.binary)
			base := append([]string{"mpirun", "--flavor", f.flavor, "-n", "2"}, f.flags...)
			// launch runs tokenRank on 2 ranks and returns the token they
			// agree on.
			launch := func(t *testing.T, env []string, wantRemote string, extra ...string) string {
				t.Helper()
				args := append(append(append([]string(nil), base...), extra...), "--", "python3", "-c", tokenRank)
				out := runEnv(t, env, bin, args...)
				lines := tokenLine.FindAllStringSubmatch(out, -1)
				if len(lines) != 2 {
					t.Fatalf("want 2 ranks' reports, got %d:\n%s", len(lines), out)
				}
				ranks := map[string]bool{}
				for _, m := range lines {
					rank, tok, leaks, remote := m[1], m[2], m[3], m[5]
					ranks[rank] = true
					if tok == "-" {
						t.Errorf("rank %s: no %s", rank, tokenVar)
					}
					if tok != lines[0][2] {
						t.Errorf("ranks disagree on the token: %q vs %q", tok, lines[0][2])
					}
					if leaks != "0" {
						t.Errorf("rank %s: the token is on %s process command lines:\n%s", rank, leaks, out)
					}
					if n, _ := strconv.Atoi(m[4]); n < 1 {
						t.Errorf("rank %s saw no launcher command line: the /proc scan proves nothing\n%s", rank, out)
					}
					if remote != wantRemote {
						t.Errorf("rank %s: FAKE_REMOTE=%s, want %s", rank, remote, wantRemote)
					}
				}
				if !ranks["0"] || !ranks["1"] {
					t.Errorf("want reports of ranks 0 and 1:\n%s", out)
				}
				return lines[0][2]
			}

			t.Run("fresh", func(t *testing.T) {
				a := launch(t, tokenEnv(), "-")
				b := launch(t, tokenEnv(), "-")
				if a == b {
					t.Errorf("two launches got the same token %s", a)
				}
				if len(a) != 64 {
					t.Errorf("token %q: want 64 hex digits", a)
				}
			})

			preset := make([]byte, 16)
			if _, err := rand.Read(preset); err != nil {
				t.Fatal(err)
			}
			presetTok := "preset-" + hex.EncodeToString(preset)
			presetEnv := tokenEnv(tokenVar + "=" + presetTok)

			t.Run("preset", func(t *testing.T) {
				if got := launch(t, presetEnv, "-"); got != presetTok {
					t.Errorf("token %q, want the one set, %q", got, presetTok)
				}
			})

			t.Run("remote", func(t *testing.T) {
				// fakehost is known only to the fake ssh: --no-host-check.
				extra := append([]string{"--hosts", "fakehost:2", "--no-host-check", "--env", "MASTER_ADDR=127.0.0.1"}, remoteArgs[f.flavor]...)
				if got := launch(t, presetEnv, "1", extra...); got != presetTok {
					t.Errorf("token %q on the remote ranks, want %q", got, presetTok)
				}
				fresh := launch(t, tokenEnv(), "1", extra...)
				if fresh == presetTok || len(fresh) != 64 {
					t.Errorf("token %q: want a new one", fresh)
				}
			})

			t.Run("dry-run", func(t *testing.T) {
				args := append(append([]string(nil), base...), "--dry-run", "--", "true")
				out := runEnv(t, presetEnv, bin, args...)
				if strings.Contains(out, presetTok) {
					t.Errorf("--dry-run prints the token:\n%s", out)
				}
				want := dryRunNames[f.flavor]
				if !strings.Contains(out, want) {
					t.Errorf("--dry-run lacks %q:\n%s", want, out)
				}
				if want == "" && strings.Contains(out, tokenVar) {
					t.Errorf("--dry-run names %s where the launcher passes its environment whole:\n%s", tokenVar, out)
				}
			})
		})
	}
}
