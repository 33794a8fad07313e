package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The time the scripts get is a positive duration: 0 and -1s are refused in
// one line, exit 2, before anything runs (they once meant 60 s), and 1ns
// is a timeout, not a nil-pointer panic (issue 30, item 12).
func TestSourceTimeouts(t *testing.T) {
	fails, err := filepath.Abs("testdata/exitcode/fails.sh")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		Code   int
		Stderr string
	}
	tests := []struct {
		name string
		args []string
		want result
	}{
		{"envsetup --timeout 1ns", []string{"envsetup", "--source", "testdata/exitcode/fails.sh", "--timeout", "1ns"},
			result{1, "batchkit: sourcing " + fails + " failed: timed out after 1ns\n"}},
		{"envsetup --timeout 0", []string{"envsetup", "--source", "testdata/exitcode/fails.sh", "--timeout", "0"},
			result{2, "batchkit: invalid --timeout 0s: want a positive duration (such as 60s or 2m)\n"}},
		{"envsetup --timeout -1s", []string{"envsetup", "--timeout", "-1s"},
			result{2, "batchkit: invalid --timeout -1s: want a positive duration (such as 60s or 2m)\n"}},
		{"run --source-timeout 0", []string{"run", "--source-timeout", "0", "-n", "1", "--", "true"},
			result{2, "batchkit: invalid --source-timeout 0s: want a positive duration (such as 60s or 2m)\n"}},
		{"exec --source-timeout -1s", []string{"exec", "--source-timeout", "-1s", "--", "true"},
			result{2, "batchkit: invalid --source-timeout -1s: want a positive duration (such as 60s or 2m)\n"}},
		{"mpirun --source-timeout 0", []string{"mpirun", "--source-timeout", "0", "-n", "1", "--", "true"},
			result{2, "batchkit: invalid --source-timeout 0s: want a positive duration (such as 60s or 2m)\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(append([]string{"batchkit"}, tt.args...), &stdout, &stderr)
			if diff := cmp.Diff(tt.want, result{code, stderr.String()}); diff != "" {
				t.Errorf("batchkit %q (-want +got):\n%s", tt.args, diff)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout: %q, want nothing", stdout.String())
			}
		})
	}
}
