package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// --version prints what the README says it prints: the version alone
// (urfave/cli's own printed "batchkit version dev"; issue 30 item 19).
func TestVersionFlag(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const says = "`batchkit --version` prints the version alone"
	if !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), says) {
		t.Errorf("README.md does not say %q", says)
	}
	for _, flag := range []string{"--version", "-v"} {
		var stdout, stderr bytes.Buffer
		if code := Main([]string{"batchkit", flag}, &stdout, &stderr); code != 0 || stdout.String() != version+"\n" || stderr.Len() > 0 {
			t.Errorf("batchkit %s: exit %d, stdout %q, stderr %q; want %q", flag, code, stdout.String(), stderr.String(), version+"\n")
		}
	}
}
