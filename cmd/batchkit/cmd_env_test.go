package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Issue 24 A3: a MASTER_ADDR built to break out of bash's $'...' quoting,
// which dash reads differently, is evaluated by every shell a batch script
// or a user may run `eval "$(batchkit env --format shell)"` in. Nothing
// runs, and the variable arrives byte for byte.
func TestEnvOutputEvalsSafely(t *testing.T) {
	const addr = "a\n'; touch PWNED; #"
	// A torchrun layer with a run id wins over any launcher variables the
	// test itself may run under (a Slurm job, say).
	for k, v := range map[string]string{
		"MASTER_ADDR": addr, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
		"LOCAL_WORLD_SIZE": "1", "TORCHELASTIC_RUN_ID": "issue24",
	} {
		t.Setenv(k, v)
	}
	for _, format := range []string{"shell", "torchrun"} {
		var stdout, stderr bytes.Buffer
		if code := Main([]string{"batchkit", "env", "--format", format}, &stdout, &stderr); code != 0 {
			t.Fatalf("batchkit env --format %s: exit %d: %s", format, code, stderr.Bytes())
		}
		scripts := t.TempDir()
		out := filepath.Join(scripts, "env.out")
		if err := os.WriteFile(out, stdout.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		script := filepath.Join(scripts, "eval.sh")
		text := `eval "$(cat "$1")"` + "\nprintf %s \"$MASTER_ADDR\"\n"
		if err := os.WriteFile(script, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, sh := range []string{"dash", "bash", "zsh"} {
			dir := t.TempDir()
			got := evalIn(t, sh, dir, script, out)
			if got != addr {
				t.Errorf("%s, --format %s: MASTER_ADDR = %q, want %q\noutput:\n%s", sh, format, got, addr, stdout.Bytes())
			}
			if _, err := os.Stat(filepath.Join(dir, "PWNED")); err == nil {
				t.Errorf("%s, --format %s: eval of the output ran touch PWNED\noutput:\n%s", sh, format, stdout.Bytes())
			}
		}
	}
}

// evalIn runs script with the shell in dir, args after it, and returns its
// stdout. A shell that fails is reported with its stderr; the test goes on
// to look for the file a breakout would have made.
func evalIn(t *testing.T, shell, dir, script string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(shell); err != nil {
		t.Fatalf("%s is not installed (apt-get install %s): this test evals batchkit's output in it", shell, shell)
	}
	argv := append([]string{script}, args...)
	if shell == "zsh" {
		argv = append([]string{"-f"}, argv...) // no user rc files
	}
	cmd := exec.Command(shell, argv...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("%s %s: %v\n%s", shell, script, err, stderr.Bytes())
	}
	return string(out)
}
