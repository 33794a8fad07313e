package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/topology"
)

// bin is the batchkit binary built once for all tests. It lives in a
// directory every "node" can read: both nodes are this host.
var bin string

func TestMain(m *testing.M) {
	flag.Parse()
	if err := raiseParallel(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "batchkit-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755)
	if err := useFastWait(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "batchkit")
	build := exec.Command("go", "build", "-o", bin, "../cmd/batchkit")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building batchkit:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// useFastWait points the tests' Slurm commands, and the jobs they submit,
// at a configuration in dir that includes the cluster's and sets
// MinJobAge=2 (fastWaitConf). sbatch --wait looks at its job 2 s after the
// submission, 8 s later, then every 32 s (a job of 12 s returned after 42),
// backing off only while the interval is below MinJobAge/2 as the command
// reads it; with 2 it looks every 2 s. The controller keeps its own
// MinJobAge, so no job is forgotten sooner. Without a cluster
// configuration it does nothing.
func useFastWait(dir string) error {
	conf := os.Getenv("SLURM_CONF")
	if conf == "" {
		conf = "/etc/slurm/slurm.conf"
	}
	b, err := os.ReadFile(conf)
	if err != nil {
		return nil // no cluster here: its tests skip, or fail saying so
	}
	// Slurm's commands look for plugstack.conf next to the configuration
	// they read, unless it says where.
	plugstack := filepath.Join(filepath.Dir(conf), "plugstack.conf")
	if _, err := os.Stat(plugstack); err != nil {
		plugstack = ""
	}
	path := filepath.Join(dir, "slurm.conf")
	if err := os.WriteFile(path, []byte(fastWaitConf(conf, b, plugstack)), 0o644); err != nil {
		return err
	}
	return os.Setenv("SLURM_CONF", path)
}

// fastWaitConf is the configuration useFastWait writes for the cluster's
// conf, whose text is text: conf included, MinJobAge=2, and the plugstack
// file next to conf ("" none) named unless text names one.
func fastWaitConf(conf string, text []byte, plugstack string) string {
	out := "# " + conf + " for the integration tests' Slurm commands (integration/main_test.go)\n" +
		"Include " + conf + "\nMinJobAge=2\n"
	if plugstack != "" && !regexp.MustCompile(`(?im)^\s*PlugStackConfig\s*=`).Match(text) {
		out += "PlugStackConfig=" + plugstack + "\n"
	}
	return out
}

func TestFastWaitConf(t *testing.T) {
	const conf = "/etc/slurm/slurm.conf"
	head := "# " + conf + " for the integration tests' Slurm commands (integration/main_test.go)\nInclude " + conf + "\nMinJobAge=2\n"
	for _, tc := range []struct {
		name, text, plugstack, want string
	}{
		{"plugstack.conf next to it", "ClusterName=local\n", "/etc/slurm/plugstack.conf", head + "PlugStackConfig=/etc/slurm/plugstack.conf\n"},
		{"none next to it", "ClusterName=local\n", "", head},
		{"it names its own", "ClusterName=local\n  plugstackconfig = /opt/p.conf\n", "/etc/slurm/plugstack.conf", head},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fastWaitConf(conf, []byte(tc.text), tc.plugstack)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// sbatch --wait returns within 2 s or so of a job's end: a job of 3 s, so
// that the backoff would have looked at it 2 and 10 s after its submission.
// It runs alone: its bound counts the job's time in the queue.
func TestFastWait(t *testing.T) {
	needCluster(t)
	start := time.Now()
	sbatchWait(t, "sleep 3\n", "-n1")
	if took := time.Since(start); took >= 10*time.Second {
		t.Errorf("sbatch --wait of a job of 3 s took %v, want it back within about 2 s of the job's end, before the 10 s of its backoff (SLURM_CONF=%s)",
			took.Round(100*time.Millisecond), os.Getenv("SLURM_CONF"))
	}
}

// requireOrSkip skips a test whose real dependency is missing, or fails it
// when BATCHKIT_REQUIRE_CLUSTER=1: in `make test` nothing may be skipped.
func requireOrSkip(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("BATCHKIT_REQUIRE_CLUSTER") == "1" {
		t.Fatalf("%s (BATCHKIT_REQUIRE_CLUSTER=1: run scripts/local-cluster.sh up)", reason)
	}
	t.Skip(reason + " (run scripts/local-cluster.sh up)")
}

// needCluster checks that both nodes of the local cluster answer.
func needCluster(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test in -short mode")
	}
	for _, tool := range []string{"srun", "sbatch", "sinfo"} {
		if _, err := exec.LookPath(tool); err != nil {
			requireOrSkip(t, tool+" not found")
		}
	}
	out, err := exec.Command("sinfo", "-h", "-N", "-o", "%N %t").Output()
	if err != nil {
		requireOrSkip(t, "sinfo failed: the local Slurm cluster is not up")
	}
	up := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && (f[0] == "node1" || f[0] == "node2") && nodeUp(f[1]) {
			up++
		}
	}
	if up < 2 {
		requireOrSkip(t, fmt.Sprintf("local cluster nodes node1,node2 not both up: sinfo says %q", strings.TrimSpace(string(out))))
	}
}

// nodeUp reports whether a node in sinfo's compact state (%t) can take a
// job: idle, mixed, allocated, completing (comp: the epilog of the job
// before is still running, which a test right after another one sees), or
// planned (plnd: idle, held by the backfill scheduler for a pending job,
// as for about 30 s after a heterogeneous job such as TestHetJob's),
// whatever flags follow the state.
func nodeUp(state string) bool {
	for _, s := range []string{"idle", "mix", "alloc", "comp", "plnd"} {
		if strings.HasPrefix(state, s) {
			return true
		}
	}
	return false
}

func TestNodeUp(t *testing.T) {
	for state, want := range map[string]bool{
		"idle": true, "mix": true, "alloc": true, "comp": true, "idle*": true, "plnd": true,
		"down": false, "down*": false, "drain": false, "drng": false, "fail": false, "unk": false, "": false,
	} {
		if got := nodeUp(state); got != want {
			t.Errorf("nodeUp(%q) = %v, want %v", state, got, want)
		}
	}
}

func needTool(t *testing.T, tool string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		requireOrSkip(t, tool+" not found")
	}
}

// run runs a command with a deadline and returns its stdout; stderr goes to
// the failure message.
func run(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// sbatchWait submits script with --wait and returns the job's output file.
func sbatchWait(t *testing.T, script string, sbatchArgs ...string) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	path := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(path, []byte("#!/bin/bash\nset -euo pipefail\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "job.out")
	args := append([]string{"--wait", "--output", out, "--chdir", dir}, sbatchArgs...)
	args = append(args, path)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sbatch", args...)
	msg, err := cmd.CombinedOutput()
	b, _ := os.ReadFile(out)
	if err != nil {
		t.Fatalf("sbatch %s: %v\n%s\njob output:\n%s", strings.Join(args, " "), err, msg, b)
	}
	return string(b)
}

// parseTopologies reads one JSON topology per line, skipping other lines,
// and returns them sorted by rank.
func parseTopologies(t *testing.T, out string) []topology.Topology {
	t.Helper()
	var tops []topology.Topology
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var top topology.Topology
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&top); err != nil {
			t.Fatalf("bad JSON line %q: %v", line, err)
		}
		tops = append(tops, top)
	}
	sort.Slice(tops, func(i, j int) bool { return tops[i].Rank < tops[j].Rank })
	return tops
}
