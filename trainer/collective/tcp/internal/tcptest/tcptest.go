// Package tcptest holds what the tests of package tcp and of its
// rendezvous share: the job token, a rank's log, a free port and the
// options of an in-process world. It imports neither package, so that
// rendezvous's own tests can use it.
package tcptest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchkit/batchkit/internal/freeport"
)

// Token is the job token of every test world.
const Token = "job-token-for-tests"

// The rest of a test world's options: every rank on loopback, a minute for
// a collective, 20 s to form the world.
const (
	MasterAddr        = "127.0.0.1"
	Timeout           = time.Minute
	RendezvousTimeout = 20 * time.Second
)

// Log collects a rank's Logf lines.
type Log struct {
	mu    sync.Mutex
	lines []string
}

// Logf records a line; it is what Options.Logf takes.
func (l *Log) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// Grep is the lines that contain substr.
func (l *Log) Grep(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.Contains(s, substr) {
			out = append(out, s)
		}
	}
	return out
}

// FreePort returns a free port for an in-process world's rank 0.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freeport.BelowEphemeral(MasterAddr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Lines is every line so far.
func (l *Log) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}
