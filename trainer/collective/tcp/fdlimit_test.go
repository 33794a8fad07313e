//go:build linux

package tcp

import (
	"github.com/batchkit/batchkit/trainer/collective/tcp/internal/tcptest"

	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchkit/batchkit/trainer/collective/backend"
)

// TestTCPFileLimit: rank 0 of 512 ranks under `ulimit -n 128` fails at
// once with a setup error that names the limit and what it needs, before
// it listens, instead of running out of descriptors while the ranks join.
// The test runs itself again with that limit (a process-wide setting).
func TestTCPFileLimit(t *testing.T) {
	if os.Getenv("BATCHKIT_TEST_FDLIMIT") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestTCPFileLimit$", "-test.v")
		cmd.Env = append(os.Environ(), "BATCHKIT_TEST_FDLIMIT=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestTCPFileLimit") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 128, Max: 128}); err != nil {
		t.Skip("cannot lower RLIMIT_NOFILE:", err)
	}
	port := tcptest.FreePort(t)
	start := time.Now()
	_, err := New(tcpTestOptions(0, 512, port))
	var se *backend.SetupError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "rank 0 of 512 needs") ||
		!strings.Contains(err.Error(), "but its limit is 128: raise it with `ulimit -n ") {
		t.Fatalf("New: %v (%T), want a setup error naming the limit of 128 and `ulimit -n`", err, err)
	}
	t.Log(err)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the error took %v, want it at once", d)
	}
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
		c.Close()
		t.Errorf("rank 0 listened on port %d, want it to fail before", port)
	}
	// A rank that links to few others needs few: it gets past the check
	// and waits for rank 0 (not there: the rendezvous times out).
	o := tcpTestOptions(100, 512, port)
	o.RendezvousTimeout = 100 * time.Millisecond
	if _, err := New(o); errors.As(err, &se) {
		t.Errorf("rank 100: %v, want it to pass the check and time out", err)
	}
}
