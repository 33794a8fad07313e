package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// countingWriter counts the Write calls that reach it: one per host would be
// one system call per host on a real stdout.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

func TestHostlistExpandIsBuffered(t *testing.T) {
	var stdout countingWriter
	var stderr bytes.Buffer
	if code := Main([]string{"batchkit", "hostlist", "expand", "n[0-65535]"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 65536 || lines[0] != "n0" || lines[65535] != "n65535" {
		t.Fatalf("got %d lines, first %q, last %q; want n0 .. n65535", len(lines), lines[0], lines[len(lines)-1])
	}
	// 65,536 names of ~6 bytes are ~450 KB: a handful of 64 KiB writes.
	if stdout.writes > 16 {
		t.Errorf("%d writes for 65,536 hosts; want them buffered (at most 16)", stdout.writes)
	}
}

func TestHostlistTasksPerNode(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"batchkit", "hostlist", "tasks-per-node", "2(x3),1"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if got, want := stdout.String(), fmt.Sprintln(2)+fmt.Sprintln(2)+fmt.Sprintln(2)+fmt.Sprintln(1); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}
