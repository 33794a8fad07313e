package integration

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestHostlistAtScale: 65,536 hosts both ways, against scontrol on the same
// list. compress reads them from standard input (they do not fit in one
// argument list), one a line as scontrol prints them.
func TestHostlistAtScale(t *testing.T) {
	needTool(t, "scontrol")
	const expr = "n[0-65535]"
	want := run(t, time.Minute, "scontrol", "show", "hostnames", expr)
	got := run(t, time.Minute, bin, "hostlist", "expand", expr)
	if got != want {
		t.Fatalf("hostlist expand %s differs from scontrol show hostnames (%d against %d bytes)", expr, len(got), len(want))
	}
	for _, tc := range []struct{ name, in string }{
		{"one a line", want},
		{"comma-separated", strings.ReplaceAll(strings.TrimSpace(want), "\n", ",")},
	} {
		cmd := exec.Command(bin, "hostlist", "compress", "-")
		cmd.Stdin = strings.NewReader(tc.in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: hostlist compress -: %v: %s", tc.name, err, stderr.String())
		}
		if got := strings.TrimSpace(string(out)); got != expr {
			t.Errorf("%s: hostlist compress - = %q, want %q", tc.name, got, expr)
		}
	}
}

// TestHostlistCompressBadStdin: standard input that is no host list fails
// at once with exit 2 and one line naming it, whatever it is.
func TestHostlistCompressBadStdin(t *testing.T) {
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	for _, tc := range []struct {
		name  string
		stdin io.Reader
		want  string
	}{
		{"/dev/zero", zero, "standard input: a line longer than"},
		{"a bad expression", strings.NewReader("n1\nn[1-\n"), `standard input line 2: invalid hostlist "n[1-"`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, "hostlist", "compress", "-")
		cmd.Stdin = tc.stdin
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("%s: hostlist compress - still running after 30 s", tc.name)
		}
		if code := cmd.ProcessState.ExitCode(); code != 2 || err == nil {
			t.Errorf("%s: exit %d, want 2", tc.name, code)
		}
		msg := stderr.String()
		if !strings.Contains(msg, tc.want) || strings.Count(msg, "\n") != 1 {
			t.Errorf("%s: stderr %q, want one line containing %q", tc.name, msg, tc.want)
		}
	}
}
