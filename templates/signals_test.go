package templates

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeLauncher stands for srun or mpirun: it records the signals it gets and,
// like batchkit train, exits 75 after a SIGUSR1 or SIGTERM, a moment later
// (train finishes its step and checkpoints first). FAKE_MODE makes
// it exit 3 at once, or die of SIGKILL.
const fakeLauncher = `#!/bin/bash
trap 'echo USR1 >> "$FAKE_LOG"; got=1' USR1
trap 'echo TERM >> "$FAKE_LOG"; got=1' TERM
echo started >> "$FAKE_LOG"
case "${FAKE_MODE-}" in
exit3) exit 3 ;;
kill) kill -KILL $$ ;;
esac
for i in $(seq 400); do [ -z "${got-}" ] || { sleep 0.2; exit 75; }; sleep 0.025; done
exit 0
`

// The generated script, in real bash with a fake launcher and a fake
// scontrol on PATH: a signal to the shell alone (sbatch --signal=B:...,
// scancel --batch) or to the whole process group (scancel --full) leaves the
// shell alive, reaches the launcher as SIGUSR1, and an exit 75 requeues the
// job when asked to; other exits are the script's exit.
func TestSbatchScriptSignals(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	set, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		requeue  bool
		mode     string         // FAKE_MODE
		sig      syscall.Signal // 0: none
		group    bool           // to the process group, not the shell alone
		code     int
		got      string // what the fake launcher recorded
		scontrol string // fake scontrol's arguments, one call a line
	}{
		{name: "USR1 to the shell", requeue: true, sig: syscall.SIGUSR1, code: 75, got: "started\nUSR1\n", scontrol: "requeue 4242\n"},
		{name: "TERM to the shell", requeue: true, sig: syscall.SIGTERM, code: 75, got: "started\nUSR1\n", scontrol: "requeue 4242\n"},
		{name: "USR1 to the group", requeue: true, sig: syscall.SIGUSR1, group: true, code: 75, scontrol: "requeue 4242\n"},
		{name: "no requeue", sig: syscall.SIGUSR1, code: 75, got: "started\nUSR1\n"},
		{name: "exit 3", requeue: true, mode: "exit3", code: 3, got: "started\n"},
		{name: "launcher killed", requeue: true, mode: "kill", code: 128 + 9, got: "started\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name, text string) string {
				path := filepath.Join(dir, name)
				if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
					t.Fatal(err)
				}
				return path
			}
			launcher := write("launcher", fakeLauncher)
			write("scontrol", "#!/bin/sh\necho \"$@\" >> \""+filepath.Join(dir, "scontrol.log")+"\"\n")
			script, err := set.Render(Sbatch, map[string]any{
				"Profile": "p", "Directives": []map[string]string{}, "Modules": []string{}, "Sources": []map[string]any{},
				"Env": []map[string]string{}, "Launch": []string{launcher}, "Requeue": tc.requeue, "Bindings": nil, "Wheels": "",
			})
			if err != nil {
				t.Fatal(err)
			}
			logPath := filepath.Join(dir, "launcher.log")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", write("job.sh", script))
			cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "SLURM_JOB_ID=4242",
				"FAKE_LOG="+logPath, "FAKE_MODE="+tc.mode)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			if tc.sig != 0 {
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if b, _ := os.ReadFile(logPath); len(b) > 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the fake launcher did not start")
					}
				}
				time.Sleep(50 * time.Millisecond) // the shell is in wait
				pid := cmd.Process.Pid
				if tc.group {
					pid = -pid
				}
				if err := syscall.Kill(pid, tc.sig); err != nil {
					t.Fatal(err)
				}
			}
			err = cmd.Wait()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					t.Fatalf("the script died of %v\nstderr:\n%s", ws.Signal(), stderr.String())
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstderr:\n%s", code, tc.code, stderr.String())
			}
			got, _ := os.ReadFile(logPath)
			if tc.group {
				// From the group signal and from the shell: one or two.
				if s := string(got); !strings.HasPrefix(s, "started\nUSR1\n") || strings.Contains(s, "TERM") {
					t.Errorf("the launcher got %q, want SIGUSR1 (once or twice)", s)
				}
			} else if diff := cmp.Diff(tc.got, string(got)); diff != "" {
				t.Errorf("signals the launcher got (-want +got):\n%s\nstderr:\n%s", diff, stderr.String())
			}
			calls, _ := os.ReadFile(filepath.Join(dir, "scontrol.log"))
			if diff := cmp.Diff(tc.scontrol, string(calls)); diff != "" {
				t.Errorf("scontrol calls (-want +got):\n%s", diff)
			}
		})
	}
}
