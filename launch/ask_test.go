package launch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A command that does not answer, through a child holding its output open
// (what exec.CommandContext alone would wait for), fails at the timeout
// with an error naming it; one that answers is read.
func TestAsk(t *testing.T) {
	dir := t.TempDir()
	slow := filepath.Join(dir, "slow")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nsleep 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		argv    []string
		out     string
		wantErr string
	}{
		{"answers", []string{"sh", "-c", "echo version 1; echo more >&2"}, "version 1\nmore\n", ""},
		{"never answers", []string{slow, "--version"}, "", slow + " --version: no answer within 200ms (killed it)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			out, err := Ask(200*time.Millisecond, tt.argv...)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%v: not context.DeadlineExceeded", err)
				}
			}
			if diff := cmp.Diff([]string{tt.out, tt.wantErr}, []string{out, gotErr}); diff != "" {
				t.Errorf("output, error (-want +got):\n%s", diff)
			}
		})
	}
}
