package templates

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sigIgnUSR1 is a bash line that appends "NAME usr1 ignored" or "NAME usr1
// not ignored" to $FAKE_LOG, from the process's own SigIgn mask (bit 9:
// SIGUSR1).
const sigIgnUSR1 = `m=$(awk '/^SigIgn/ {print $2}' /proc/$$/status)
if (( 0x$m & 0x200 )); then echo "$NAME usr1 ignored" >>"$FAKE_LOG"; else echo "$NAME usr1 not ignored" >>"$FAKE_LOG"; fi
`

// The batch script for Intel MPI's Hydra (ShieldUSR1), in real bash with a
// fake mpirun, srun and proxy: the launcher starts with SIGUSR1 ignored;
// it runs $I_MPI_HYDRA_BOOTSTRAP_EXEC as Hydra runs srun, and the proxy
// srun starts ignores SIGUSR1 too, with its own arguments; the wrapper is
// gone when the script has ended. Without ShieldUSR1 none of it.
func TestSbatchScriptShieldUSR1(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	set, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		shield bool
		want   string
	}{
		{true, "mpirun usr1 ignored\nsrun: -N 2 -n 2 --nodelist node1,node2 --input none /bin/bash -c trap \"\" USR1; exec \"$@\" PROXY PROXY --upstream-port 4242\n" +
			"proxy usr1 ignored\nproxy: --upstream-port 4242\n"},
		{false, "mpirun usr1 not ignored\nno I_MPI_HYDRA_BOOTSTRAP_EXEC\n"},
	} {
		t.Run(map[bool]string{true: "shield", false: "no shield"}[tc.shield], func(t *testing.T) {
			dir := t.TempDir()
			tmp := filepath.Join(dir, "tmp")
			if err := os.Mkdir(tmp, 0o755); err != nil {
				t.Fatal(err)
			}
			write := func(name, text string) string {
				path := filepath.Join(dir, name)
				if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
					t.Fatal(err)
				}
				return path
			}
			proxy := write("hydra_bstrap_proxy", "#!/bin/bash\nNAME=proxy\n"+sigIgnUSR1+`echo "proxy: $*" >>"$FAKE_LOG"`+"\n")
			// srun runs its command where the options end, as on a node.
			write("srun", `#!/bin/bash
echo "srun: $*" >>"$FAKE_LOG"
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift 2; done
exec "$@"
`)
			// mpirun runs srun the way Hydra's slurm bootstrap does.
			mpirun := write("mpirun", "#!/bin/bash\nNAME=mpirun\n"+sigIgnUSR1+`
if [ -z "${I_MPI_HYDRA_BOOTSTRAP_EXEC-}" ]; then echo "no I_MPI_HYDRA_BOOTSTRAP_EXEC" >>"$FAKE_LOG"; exit 0; fi
"$I_MPI_HYDRA_BOOTSTRAP_EXEC" -N 2 -n 2 --nodelist node1,node2 --input none "$FAKE_PROXY" --upstream-port 4242
`)
			script, err := set.Render(Sbatch, map[string]any{
				"Profile": "p", "Directives": []map[string]string{}, "Modules": []string{}, "Sources": []map[string]any{},
				"Env": []map[string]string{}, "Launch": []string{mpirun}, "Requeue": false, "Bindings": nil, "Wheels": "",
				"ShieldUSR1": tc.shield,
			})
			if err != nil {
				t.Fatal(err)
			}
			logPath := filepath.Join(dir, "log")
			cmd := exec.Command("bash", write("job.sh", script))
			cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "TMPDIR="+tmp,
				"FAKE_LOG="+logPath, "FAKE_PROXY="+proxy)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("the batch script: %v\n%s", err, out)
			}
			got, _ := os.ReadFile(logPath)
			if diff := cmp.Diff(tc.want, strings.ReplaceAll(string(got), proxy, "PROXY")); diff != "" {
				t.Errorf("what the fakes saw (-want +got):\n%s", diff)
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("the script left %s in TMPDIR", left[0].Name())
			}
		})
	}
	// A TMPDIR the wrapper cannot be written to: one line with the fix,
	// and no launcher started.
	t.Run("TMPDIR not writable", func(t *testing.T) {
		dir := t.TempDir()
		launcher := filepath.Join(dir, "mpirun")
		if err := os.WriteFile(launcher, []byte("#!/bin/sh\ntouch \"$0.ran\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		script, err := set.Render(Sbatch, map[string]any{
			"Profile": "p", "Directives": []map[string]string{}, "Modules": []string{}, "Sources": []map[string]any{},
			"Env": []map[string]string{}, "Launch": []string{launcher}, "Requeue": false, "Bindings": nil, "Wheels": "",
			"ShieldUSR1": true,
		})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Join(dir, "missing"))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "batchkit: cannot write Hydra's srun wrapper in "+filepath.Join(dir, "missing")+": set TMPDIR") {
			t.Errorf("%v, want exit 1 and the line naming TMPDIR:\n%s", err, out)
		}
		if _, err := os.Stat(launcher + ".ran"); err == nil {
			t.Error("the launcher ran")
		}
	})
}
