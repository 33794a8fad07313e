package cmdgroup

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A script whose child sleeps with the pipes open: unbounded, Output waits
// for the sleep; bounded, it returns at the timeout and the child is dead.
func TestBoundKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	script := filepath.Join(dir, "slow")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 100 &\necho $! > "+pidFile+"\nwait\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cmd := exec.CommandContext(ctx, script)
	Bound(cmd, time.Second)
	start := time.Now()
	_, err := cmd.Output()
	if took := time.Since(start); err == nil || took > 5*time.Second {
		t.Fatalf("Output = %v after %v; want an error within the timeout and wait delay", err, took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // a zombie until init reaps it
		if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && strings.Contains(string(st), ") Z ") {
			return
		}
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the script's child %d is still alive", pid)
	}
}
