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
// like a program that does not tell them apart (batchkit train before it
// did), exits 75 after a SIGUSR1 or SIGTERM, a moment later (train
// finishes its step and checkpoints first). FAKE_MODE makes it exit 3 at
// once, or die of SIGKILL. Its loop is arithmetic: a group SIGTERM that
// killed a $(seq 400) left it no rounds, and it exited 0 (a CI failure).
const fakeLauncher = `#!/bin/bash
trap 'echo USR1 >> "$FAKE_LOG"; got=1' USR1
trap 'echo TERM >> "$FAKE_LOG"; got=1' TERM
echo started >> "$FAKE_LOG"
case "${FAKE_MODE-}" in
exit3) exit 3 ;;
kill) kill -KILL $$ ;;
esac
for ((i = 0; i < 400; i++)); do [ -z "${got-}" ] || { sleep 0.2; exit 75; }; sleep 0.025; done
exit 0
`

// fakeSource is an environment script the batch script sources before it
// starts the launcher: it says so and takes a moment, for a signal that
// comes before the launch.
const fakeSource = `echo sourcing >> "$FAKE_LOG"; sleep 0.3
`

// The generated script, in real bash with a fake launcher and a fake
// scontrol on PATH: a signal to the shell alone (sbatch --signal=B:...,
// scancel --batch) or to the whole process group (scancel --full, a plain
// scancel, the time limit) leaves the shell alive and reaches the
// launcher as SIGUSR1. An exit 75 requeues the job when asked to, but
// never after a SIGTERM to the shell: that is a cancel or the time limit,
// whatever the program exits with. A signal before the launch starts no
// launcher: a SIGTERM ends the job, a SIGUSR1 requeues it. Other exits are the
// script's exit. With --requeue every run starts with a line naming it.
func TestSbatchScriptSignals(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	set, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	const (
		usr1 = syscall.SIGUSR1
		term = syscall.SIGTERM
	)
	for _, tc := range []struct {
		name    string
		requeue bool
		mode    string           // FAKE_MODE
		sigs    []syscall.Signal // sent in turn, 20 ms apart
		group   bool             // to the process group, not the shell alone
		early   bool             // while the environment script runs, before the launch
		restart string           // SLURM_RESTART_COUNT
		code    int
		got     string // what the fake launcher recorded ("" with group: not checked)
		more    bool   // got and maybe more SIGUSR1: two close together can be one to bash
		// scontrol is fake scontrol's arguments, one call a line; say a
		// line the script must print.
		scontrol, say string
	}{
		{name: "USR1 to the shell", requeue: true, sigs: []syscall.Signal{usr1}, code: 75, got: "started\nUSR1\n", scontrol: "requeue 4242\n",
			say: "batchkit: exit 75 (preempted): requeueing job 4242"},
		{name: "USR1 to the group", requeue: true, sigs: []syscall.Signal{usr1}, group: true, code: 75, scontrol: "requeue 4242\n"},
		// scancel --batch --signal=TERM, sbatch --signal=B:TERM@60: the
		// ranks checkpoint on the SIGUSR1, the job is not requeued.
		{name: "TERM to the shell", requeue: true, sigs: []syscall.Signal{term}, code: 75, got: "started\nUSR1\n",
			say: "batchkit: exit 75 after a SIGTERM (a cancel or the time limit): not requeueing job 4242"},
		// A plain scancel and the time limit: SIGTERM to every process.
		{name: "TERM to the group", requeue: true, sigs: []syscall.Signal{term}, group: true, code: 75, say: "not requeueing job 4242"},
		{name: "TERM then USR1 to the shell", requeue: true, sigs: []syscall.Signal{term, usr1}, code: 75, got: "started\nUSR1\n", more: true, say: "not requeueing"},
		{name: "USR1 then TERM to the shell", requeue: true, sigs: []syscall.Signal{usr1, term}, code: 75, got: "started\nUSR1\n", more: true, say: "not requeueing"},
		{name: "TERM twice to the group", requeue: true, sigs: []syscall.Signal{term, term}, group: true, code: 75, say: "not requeueing"},
		{name: "TERM before the launch", requeue: true, sigs: []syscall.Signal{term}, early: true, code: 143, got: "sourcing\n",
			say: "batchkit: SIGTERM (a cancel or the time limit) before the launch: not starting it"},
		// Nothing ran, nothing is lost: requeued as a preempted job is.
		{name: "USR1 before the launch", requeue: true, sigs: []syscall.Signal{usr1}, early: true, code: 75, got: "sourcing\n", scontrol: "requeue 4242\n",
			say: "batchkit: SIGUSR1 (a preemption) before the launch: not starting it"},
		{name: "USR1 then TERM before the launch", requeue: true, sigs: []syscall.Signal{usr1, term}, early: true, code: 143, got: "sourcing\n",
			say: "before the launch: not starting it"},
		{name: "no requeue", sigs: []syscall.Signal{usr1}, code: 75, got: "started\nUSR1\n"},
		{name: "exit 3", requeue: true, mode: "exit3", code: 3, got: "started\n", say: "batchkit: job 4242, run 1\n"},
		{name: "third run", requeue: true, mode: "exit3", restart: "2", code: 3, got: "started\n", say: "batchkit: job 4242, run 3 (requeued 2 time(s))\n"},
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
			sources := []map[string]any{}
			if tc.early {
				sources = append(sources, map[string]any{"Path": write("env.sh", fakeSource), "Args": []string{}})
			}
			script, err := set.Render(Sbatch, map[string]any{
				"Profile": "p", "Directives": []map[string]string{}, "Modules": []string{}, "Sources": sources,
				"Env": []map[string]string{}, "Launch": []string{launcher}, "Requeue": tc.requeue, "Bindings": nil, "Wheels": "", "ShieldUSR1": false,
			})
			if err != nil {
				t.Fatal(err)
			}
			logPath := filepath.Join(dir, "launcher.log")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", write("job.sh", script))
			cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "SLURM_JOB_ID=4242",
				"FAKE_LOG="+logPath, "FAKE_MODE="+tc.mode, "SLURM_RESTART_COUNT="+tc.restart)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			if len(tc.sigs) > 0 {
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if b, _ := os.ReadFile(logPath); len(b) > 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("neither the environment script nor the fake launcher started")
					}
				}
				time.Sleep(50 * time.Millisecond) // the shell is in wait, or in the environment script
				pid := cmd.Process.Pid
				if tc.group {
					pid = -pid
				}
				for i, sig := range tc.sigs {
					if i > 0 {
						time.Sleep(20 * time.Millisecond)
					}
					if err := syscall.Kill(pid, sig); err != nil {
						t.Fatal(err)
					}
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
				// From the group signal and from the shell: the launcher
				// stopped after the first.
				if s := string(got); !strings.HasPrefix(s, "started\n") || !strings.Contains(s, "USR1\n") {
					t.Errorf("the launcher got %q, want SIGUSR1 (from the shell) among them", s)
				}
			} else if rest, ok := strings.CutPrefix(string(got), tc.got); tc.more && ok && strings.Trim(rest, "USR1\n") == "" {
				// as wanted
			} else if diff := cmp.Diff(tc.got, string(got)); diff != "" {
				t.Errorf("signals the launcher got (-want +got):\n%s\nstderr:\n%s", diff, stderr.String())
			}
			calls, _ := os.ReadFile(filepath.Join(dir, "scontrol.log"))
			if diff := cmp.Diff(tc.scontrol, string(calls)); diff != "" {
				t.Errorf("scontrol calls (-want +got):\n%s\nstderr:\n%s", diff, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.say) {
				t.Errorf("stderr lacks %q:\n%s", tc.say, stderr.String())
			}
			if tc.requeue && !strings.HasPrefix(stderr.String(), "batchkit: job 4242, run ") {
				t.Errorf("stderr does not start with the run's line:\n%s", stderr.String())
			}
		})
	}
}
