package integration

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/topology"
)

// mpirunFlavors are the real flavors `batchkit mpirun` is run with here.
// Open MPI refuses root and counts 2 cores without these flags.
var mpirunFlavors = []struct {
	flavor, binary string
	flags          []string
}{
	{"openmpi", "mpirun.openmpi", []string{"--allow-run-as-root", "--oversubscribe"}},
	{"mpich", "mpirun.mpich", nil},
}

// localEnv is this process's environment without Slurm's variables, so a
// local run stays local even when the tests run inside a job. SLURM_CONF,
// which says no job is there, stays (see useFastWait).
func localEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM_") || strings.HasPrefix(kv, "SLURM_CONF=") {
			env = append(env, kv)
		}
	}
	return env
}

// runLocal runs a command outside any Slurm job and returns its stdout.
func runLocal(t *testing.T, name string, args ...string) string {
	t.Helper()
	return runEnv(t, localEnv(), name, args...)
}

// batchkit mpirun on this host, no Slurm: every rank gets the contract
// from batchkit exec, all agree on 127.0.0.1 and one free port.
func TestMpirunLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real MPI launchers")
	}
	for _, f := range mpirunFlavors {
		t.Run(f.flavor, func(t *testing.T) {
			needTool(t, f.binary)
			args := append([]string{"mpirun", "--flavor", f.flavor, "-n", "2"}, f.flags...)
			out := runLocal(t, bin, append(args, "--", bin, "env", "--format", "json")...)
			tops := parseTopologies(t, out)
			if len(tops) != 2 {
				t.Fatalf("want 2 ranks, got %d:\n%s", len(tops), out)
			}
			for i, top := range tops {
				want := topology.Topology{
					Launcher: topology.Torchrun, Rank: i, WorldSize: 2, LocalRank: i, LocalWorldSize: 2,
					NumNodes: 1, Hosts: top.Hosts, MasterAddr: "127.0.0.1", MasterPort: tops[0].MasterPort, JobID: top.JobID,
				}
				if diff := cmp.Diff(want, top); diff != "" {
					t.Errorf("rank %d (-want +got):\n%s", i, diff)
				}
			}
			if p := tops[0].MasterPort; p <= 0 || p == topology.DefaultPort {
				t.Errorf("MASTER_PORT %d: want the free port batchkit mpirun chose", p)
			}
		})
	}
}

// Inside `sbatch -N2 --ntasks-per-node=2`, `batchkit mpirun -n 4` takes the
// hosts from the allocation: 4 ranks, 2 per node, MASTER_ADDR the first
// node and MASTER_PORT derived from the job id — for each flavor and srun.
func TestMpirunInsideSbatch(t *testing.T) {
	mostlyWaits(t)
	needCluster(t)
	needTool(t, "python3")
	type launch struct {
		name, tool string
		args       []string
	}
	launches := []launch{{"srun", "srun", []string{"--launcher", "srun", "--flavor", "mpich"}}}
	for _, f := range mpirunFlavors {
		launches = append(launches, launch{f.flavor, f.binary, append([]string{"--flavor", f.flavor}, f.flags...)})
	}
	for _, l := range launches {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			needTool(t, l.tool)
			script := fmt.Sprintf("echo job=$SLURM_JOB_ID\n%s mpirun %s -n 4 -- python3 -c '%s'\n", bin, strings.Join(l.args, " "), torchVars)
			out := sbatchWait(t, script, "-N2", "--ntasks-per-node=2")
			// Hydra's output forwarding sometimes joins two ranks' lines
			// ("{...}{...}\n\n"), with or without batchkit.
			out = strings.ReplaceAll(out, "}{", "}\n{")
			checkExported(t, out, []int{2, 2}, "node1")
			var job string
			for _, line := range strings.Split(out, "\n") {
				if v, ok := strings.CutPrefix(line, "job="); ok {
					job = v
				}
			}
			port := fmt.Sprint(topology.PortForJob(job))
			if !strings.Contains(out, `"MASTER_PORT": "`+port+`"`) {
				t.Errorf("MASTER_PORT is not PortForJob(%s) = %s:\n%s", job, port, out)
			}
		})
	}
}

// injectionStrings returns n deterministic strings full of shell
// metacharacters. Each one that could run a command would create marker.
func injectionStrings(n int, marker string) []string {
	fixed := []string{
		"$(touch " + marker + ")", "`touch " + marker + "`", "; touch " + marker, "| touch " + marker,
		"&& touch " + marker, "\ntouch " + marker + "\n", "' ; touch " + marker + "; '", `"; touch ` + marker + `; "`,
		"$(", "`", "'", `"`, `\`, `\'`, `\"`, "$((1+1))", "${PATH}", "$HOME", "$0", "$@", "!!", "!$",
		"*", "?", "[a-z]*", "/*", "~", "~root", "{a,b}", "{1..3}", "#", "a #b", "a;b", "a|b", "a&b", "a&&b", "a>b", "<a",
		"-n", "-np", "--", "-x", "-genv", "-f", "--host", "-hosts", "::", ": ", "a:b", ",", "a,b", "=", "a=b", "K=V,W=X", "%s%n%d",
		"", " ", "  ", "\t", "\n", "\r\n", "a b", " lead", "trail ", "é", "日本語", "🙂 emoji", "\u200b", "\xff\xfe", "\xc3",
		"\x01\x07\x1b[31m", "a\x7fb", strings.Repeat("x", 2000),
	}
	metas := []string{"$(", ")", "`", "'", `"`, "\\", ";", "|", "&", "\n", " ", "*", "?", "[", "]", "{", "}", "~", "#",
		"$", "!", "<", ">", "=", ",", ":", "-", "--", "%", "\t", "touch " + marker, "é", "日", "🙂", "\xff"}
	r := rand.New(rand.NewPCG(2024, 7))
	out := append([]string(nil), fixed...)
	for len(out) < n {
		var b strings.Builder
		if r.IntN(4) == 0 {
			b.WriteString("-") // a leading dash looks like a launcher option
		}
		for k := r.IntN(12); k >= 0; k-- {
			switch r.IntN(3) {
			case 0:
				b.WriteString(metas[r.IntN(len(metas))])
			case 1:
				b.WriteByte(byte('a' + r.IntN(26)))
			default:
				c := rune(1 + r.IntN(0x2FFF))
				if utf8.ValidRune(c) {
					b.WriteRune(c)
				}
			}
		}
		if b.String() != ":" { // refused: see TestMpirunColonArgument
			out = append(out, b.String())
		}
	}
	return out[:n]
}

// printArgvEnv prints its arguments and BKT_* variables, hex-encoded so
// that every byte is compared.
const printArgvEnv = `import json, os, sys
print("BKT-JSON " + json.dumps({"argv": [os.fsencode(a).hex() for a in sys.argv[1:]],
  "env": {k.decode(): v.hex() for k, v in os.environb.items() if k.startswith(b"BKT_")}}), flush=True)`

// Hundreds of hostile strings as program arguments and --env values: the
// --dry-run command line, run by bash, delivers each byte for byte through
// the launcher and batchkit exec, and runs nothing else.
func TestMpirunInjection(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real MPI launchers")
	}
	needTool(t, "bash")
	needTool(t, "python3")
	dir := t.TempDir()
	marker := filepath.Join(dir, "MARKER")
	strs := injectionStrings(300, marker)
	const batch = 60
	type target struct {
		name, tool string
		flags      []string
		cluster    bool
	}
	var targets []target
	for _, f := range mpirunFlavors {
		targets = append(targets, target{f.flavor, f.binary, append([]string{"--flavor", f.flavor}, f.flags...), false})
	}
	// srun passes the environment on its own process (env K=V srun ...).
	targets = append(targets, target{"srun", "srun", []string{"--launcher", "srun", "--flavor", "mpich"}, true})
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			if tg.cluster {
				needCluster(t)
			}
			needTool(t, tg.tool)
			for start := 0; start < len(strs); start += batch {
				part := strs[start:min(start+batch, len(strs))]
				args := append([]string{"mpirun", "--dry-run", "-n", "1"}, tg.flags...)
				wantEnv := map[string]string{}
				for i, s := range part {
					k := fmt.Sprintf("BKT_%03d", start+i)
					args = append(args, "--env", k+"="+s)
					wantEnv[k] = hex.EncodeToString([]byte(s))
				}
				args = append(append(args, "--", "python3", "-c", printArgvEnv), part...)
				line := runLocal(t, bin, args...)
				// One command: its only line breaks are the arguments' own, kept
				// literally inside single quotes: the program's, and each
				// value's twice (--env, argv).
				breaks := 1 + strings.Count(printArgvEnv, "\n")
				for _, s := range part {
					breaks += 2 * strings.Count(s, "\n")
				}
				if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != breaks {
					t.Fatalf("dry run is not one command line (want %d line breaks):\n%s", breaks, line)
				}
				out := runLocal(t, "bash", "-c", line)
				var got struct {
					Argv []string          `json:"argv"`
					Env  map[string]string `json:"env"`
				}
				n := 0
				for _, l := range strings.Split(out, "\n") {
					if js, ok := strings.CutPrefix(l, "BKT-JSON "); ok {
						n++
						if err := json.Unmarshal([]byte(js), &got); err != nil {
							t.Fatalf("%v in %q", err, l)
						}
					}
				}
				if n != 1 {
					t.Fatalf("want one rank's output, got %d:\n%s", n, out)
				}
				wantArgv := make([]string, len(part))
				for i, s := range part {
					wantArgv[i] = hex.EncodeToString([]byte(s))
				}
				for i := range wantArgv {
					if i >= len(got.Argv) || got.Argv[i] != wantArgv[i] {
						var g []byte
						if i < len(got.Argv) {
							g, _ = hex.DecodeString(got.Argv[i])
						}
						t.Errorf("argument %d: sent %q, program got %q", start+i, part[i], g)
					}
				}
				if len(got.Argv) != len(wantArgv) {
					t.Errorf("sent %d arguments, program got %d", len(wantArgv), len(got.Argv))
				}
				for k, v := range wantEnv {
					if got.Env[k] != v {
						g, _ := hex.DecodeString(got.Env[k])
						t.Errorf("%s: sent %q, rank got %q", k, mustHex(v), g)
					}
				}
				if len(got.Env) != len(wantEnv) {
					t.Errorf("sent %d BKT_ variables, rank has %d", len(wantEnv), len(got.Env))
				}
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("%s exists: a string was executed", marker)
			}
		})
	}
}

func mustHex(s string) string {
	b, _ := hex.DecodeString(s)
	return string(b)
}

// A bare ":" argument would start a second program under every launcher
// (MPMD): refused with exit 2 before anything runs.
func TestMpirunColonArgument(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the batchkit binary")
	}
	cmd := exec.Command(bin, "mpirun", "--dry-run", "--flavor", "mpich", "--mpirun", "mpirun.mpich", "-n", "1", "--", "echo", ":", "touch", "x")
	cmd.Env = localEnv()
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("want exit 2, got %v: %s", err, out)
	}
	if !strings.Contains(string(out), `argument 1 of echo is ":"`) {
		t.Errorf("message %q", out)
	}
}

// ptyDriver runs argv on a new pseudo-terminal, presses Ctrl-C once the
// program prints "ready", sends SIGTERM to it a moment later, and prints
// the terminal's output and the exit status.
const ptyDriver = `import os, pty, signal, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
out = b""
def read_until(s, timeout=20):
    global out
    end = time.time() + timeout
    while s not in out and time.time() < end:
        try:
            out += os.read(fd, 4096)
        except OSError:
            break
read_until(b"ready")
os.write(fd, b"\x03")
time.sleep(0.7)
os.kill(pid, signal.SIGTERM)
read_until(b"term after")
_, status = os.waitpid(pid, 0)
# The line may still be arriving: drain the terminal until it closes.
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
print(out.decode(errors="replace").replace("\r", ""))
print("status", os.waitstatus_to_exitcode(status))`

// countingLauncher counts the SIGINTs it receives and exits 40 on SIGTERM.
// With "own-group" it first leaves batchkit's process group, so that only
// what batchkit forwards can reach it.
const countingLauncher = `#!/usr/bin/env python3
import os, signal, sys, time
if "own-group" in sys.argv:
    os.setpgid(0, 0)
n = 0
def on_int(*_):
    global n
    n += 1
    print("interrupt", n, flush=True)
def on_term(*_):
    print("term after", n, flush=True)
    sys.exit(40)
signal.signal(signal.SIGINT, on_int)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(0.05)
`

// On a terminal, Ctrl-C reaches the launcher from the terminal itself and
// batchkit does not send it a second time (Open MPI's mpirun reads a second
// Ctrl-C as "kill now"); SIGTERM to batchkit is forwarded.
func TestMpirunTerminalInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the batchkit binary on a pseudo-terminal")
	}
	needTool(t, "python3")
	launcher := filepath.Join(t.TempDir(), "counting-mpirun")
	if err := os.WriteFile(launcher, []byte(countingLauncher), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		group string
		want  []string // in the output, in order
	}{
		{"same-group", []string{"interrupt 1\n", "term after 1\n", "status 40\n"}},
		// Outside the terminal's process group only a forwarded SIGINT
		// could arrive: none must.
		{"own-group", []string{"term after 0\n", "status 40\n"}},
	} {
		t.Run(tt.group, func(t *testing.T) {
			out := runLocal(t, "python3", "-c", ptyDriver, bin, "mpirun", "--flavor", "mpich", "--mpirun", launcher,
				"--mpi-arg", tt.group, "-n", "1", "--", "true")
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("want %q in order in:\n%s", tt.want, out)
				}
				rest = rest[i+len(w):]
			}
			if strings.Count(out, "interrupt") > 1 {
				t.Errorf("Ctrl-C reached the launcher twice:\n%s", out)
			}
		})
	}
}
