package local

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildBatchkit builds the batchkit binary into a temporary directory.
func buildBatchkit(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to build batchkit")
	}
	bin := filepath.Join(t.TempDir(), "batchkit")
	out, err := exec.Command(goTool, "build", "-o", bin, "github.com/batchkit/batchkit/cmd/batchkit").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// SIGTERM to the real launcher (signal.Notify in cmd_run.go) reaches every
// rank; the ranks handle it and exit 0, so batchkit exits 143.
func TestBatchkitRunForwardsSIGTERM(t *testing.T) {
	t.Parallel()
	bin := buildBatchkit(t)
	cmd := exec.Command(bin, "run", "-n", "3", "--", "sh", "-c",
		`trap "echo got TERM; exit 0" TERM; echo ready; sleep 1000 & wait`)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Should the launcher hang, kill it: the output loop below ends then.
	watchdog := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
	defer watchdog.Stop()

	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var got []string
	timeout := time.After(5 * time.Second)
	for ready := 0; ready < 3; {
		select {
		case l := <-lines:
			if strings.HasSuffix(l, " ready") {
				ready++
			}
		case <-timeout:
			t.Fatal("ranks not ready within 5s")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		got = append(got, l)
	}
	err = cmd.Wait()
	slices.Sort(got)
	if want := []string{"[0] got TERM", "[1] got TERM", "[2] got TERM"}; !slices.Equal(got, want) {
		t.Errorf("stdout after SIGTERM %q, want %q", got, want)
	}
	if code := cmd.ProcessState.ExitCode(); code != 143 {
		t.Errorf("exit code %d (%v), want 143; stderr %q", code, err, stderr.String())
	}
	if want := "batchkit: got SIGTERM; forwarding it to 3 ranks\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}
