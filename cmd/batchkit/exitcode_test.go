package main

import (
	"bytes"
	"strings"
	"testing"
)

// Exit codes are part of the interface: 2 for usage and bad input, 1 for
// runtime failures, the child's own code for exec (testdata/script/exec.txtar:
// a successful exec would replace this test binary).
func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
	}{
		{"help", nil, []string{"--help"}, 0},
		{"no command: help", nil, nil, 0},
		{"unknown command", nil, []string{"bogus"}, 2},
		{"unknown subcommand", nil, []string{"profile", "bogus"}, 2},
		{"group without subcommand: help", nil, []string{"hostlist"}, 0},
		{"help of an unknown topic", nil, []string{"help", "nosuch"}, 2},
		{"help of a group's unknown topic", nil, []string{"profile", "help", "nosuch"}, 2},
		{"a host named h is a host", nil, []string{"hostlist", "expand", "h", "n1"}, 0},
		{"completion with an extra argument", nil, []string{"completion", "bash", "extra"}, 2},
		{"unknown flag", nil, []string{"env", "--bogus"}, 2},
		{"unknown format", nil, []string{"env", "--format", "xml"}, 2},
		{"bad variable", map[string]string{"PMI_RANK": "x", "PMI_SIZE": "2"}, []string{"env"}, 2},
		{"conflict", map[string]string{"OMPI_COMM_WORLD_RANK": "1", "PMIX_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}, []string{"env"}, 2},
		{"bad hostlist", nil, []string{"hostlist", "expand", "n[1-"}, 2},
		{"exec without command", nil, []string{"exec"}, 2},
		{"exec not found", nil, []string{"exec", "--", "/nonexistent/prog"}, 127},
		{"exec not executable", nil, []string{"exec", "--", "/etc/hostname"}, 126},
		{"exec a directory", nil, []string{"exec", "--", "/tmp"}, 126},
		{"run a directory", nil, []string{"run", "-n", "1", "--", "/tmp"}, 126},
		{"run with negative --max-restarts", nil, []string{"run", "-n", "1", "--max-restarts", "-1", "--", "true"}, 2},
		{"run with non-numeric --max-restarts", nil, []string{"run", "-n", "1", "--max-restarts", "x", "--", "true"}, 2},
		{"run with --max-restarts", nil, []string{"run", "-n", "1", "--max-restarts", "1", "--", "true"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_JOB_ID", "SLURM_STEP_ID",
				"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALRANKID", "MASTER_ADDR", "MASTER_PORT"} {
				t.Setenv(k, "")
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := Main(append([]string{"batchkit"}, tt.args...), &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			if code != 0 {
				lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
				if len(lines) != 1 || !strings.HasPrefix(lines[0], "batchkit: ") {
					t.Errorf("stderr should be one 'batchkit: ' line, got %q", stderr.String())
				}
			}
		})
	}
}
