package slurm

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDirective(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want Directive
		err  string
	}{
		{raw: "--mail-type=END,FAIL", want: Directive{"mail-type", "END,FAIL"}},
		{raw: "--exclusive", want: Directive{"exclusive", ""}},
		{raw: "#SBATCH --qos=high", want: Directive{"qos", "high"}},
		{raw: "--comment key=val", want: Directive{"comment", "key=val"}},
		{raw: "--comment=key=val", want: Directive{"comment", "key=val"}},
		{raw: "--comment\tkey=val", want: Directive{"comment", "key=val"}},
		{raw: "-x", err: `sbatch directive "-x": want the long form --flag=value`},
		{raw: "--=x", err: `sbatch directive "--=x": "" is not an option name`},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			got, err := ParseDirective(tc.raw)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDirectives(t *testing.T) {
	// The site's extra directives come first: sbatch takes the last of
	// repeated ones, and the user's options beat the site's.
	got, err := JobOptions{
		JobName: "mine", Time: "60", Nodes: "2-4", QOS: "mine",
		SiteExtra: []string{"--time=7", "--qos=site"},
		Extra:     []string{"--comment=x"},
	}.Directives()
	if err != nil {
		t.Fatal(err)
	}
	want := []Directive{{"time", "7"}, {"qos", "site"}, {"job-name", "mine"}, {"nodes", "2-4"}, {"time", "60"}, {"qos", "mine"}, {"comment", "x"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name string
		o    JobOptions
		err  string
	}{
		{"nodes not a number", JobOptions{Nodes: "abc"}, `--nodes "abc": want a number of nodes N or a range MIN-MAX, at least 1`},
		{"nodes 0", JobOptions{Nodes: "0"}, `--nodes "0"`},
		{"nodes negative", JobOptions{Nodes: "-1"}, `--nodes "-1"`},
		{"nodes blank", JobOptions{Nodes: " 2"}, `--nodes " 2"`},
		{"nodes range backwards", JobOptions{Nodes: "4-2"}, `--nodes "4-2"`},
		{"line break in a named option", JobOptions{JobName: "a\nb"}, `--job-name "a\nb": contains a line break or NUL`},
		{"line break in an extra", JobOptions{Extra: []string{"--comment=a\rb"}}, `--comment "a\rb": contains a line break`},
		{"negative tasks", JobOptions{NTasks: -1}, "--ntasks -1: must not be negative"},
		// What batchkit sets itself cannot be set again raw, in any spelling.
		{"--sbatch-arg nodes", JobOptions{Nodes: "2", Extra: []string{"--nodes=3"}},
			`--sbatch-arg "--nodes=3" sets --nodes, which batchkit sbatch writes itself: use its -N/--nodes flag`},
		{"--sbatch-arg ntasks, short and attached", JobOptions{Extra: []string{"-n7"}},
			`--sbatch-arg "-n7" sets --ntasks, which batchkit sbatch writes itself: use its -n/--ntasks flag`},
		{"extra_sbatch job name", JobOptions{SiteExtra: []string{"--job-name=site"}},
			`slurm.extra_sbatch "--job-name=site" sets --job-name, which batchkit sbatch writes itself: use its -J/--job-name flag`},
		{"extra_sbatch abbreviated", JobOptions{SiteExtra: []string{"--ntasks-per-n 2"}},
			`slurm.extra_sbatch "--ntasks-per-n 2" sets --ntasks-per-node, which batchkit sbatch writes itself: use its --ntasks-per-node flag`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.o.Directives()
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
		})
	}
	for _, ok := range []string{"1", "2", "2-4", "3-3"} {
		if _, err := (JobOptions{Nodes: ok}).Directives(); err != nil {
			t.Errorf("--nodes %s: %v", ok, err)
		}
	}
}

// The options batchkit names are written as directives, in a fixed order.
func TestDirectivesNamed(t *testing.T) {
	got, err := JobOptions{
		Mem: "4G", MemPerCPU: "1G", Gres: "gpu:a100:4", GPUsPerNode: "4", GPUsPerTask: "1",
		Nodelist: "node[1-2]", Exclude: "node3", Reservation: "maint", Chdir: "/scratch/my run",
		MailType: "END,FAIL", MailUser: "me@example.org",
	}.Directives()
	if err != nil {
		t.Fatal(err)
	}
	want := []Directive{
		{"mem", "4G"}, {"mem-per-cpu", "1G"}, {"gres", "gpu:a100:4"}, {"gpus-per-node", "4"}, {"gpus-per-task", "1"},
		{"nodelist", "node[1-2]"}, {"exclude", "node3"}, {"reservation", "maint"},
		{"chdir", "/scratch/my run"}, {"mail-type", "END,FAIL"}, {"mail-user", "me@example.org"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A requeued job appends every run's output to its files (Slurm truncates
// them at each start by default, leaving only the last run's); a user's
// own --open-mode, after it, wins.
func TestDirectivesRequeueAppends(t *testing.T) {
	for _, tc := range []struct {
		o    JobOptions
		want []Directive
	}{
		{JobOptions{Output: "o", Requeue: true}, []Directive{{"output", "o"}, {"requeue", ""}, {"open-mode", "append"}}},
		{JobOptions{Requeue: true, Extra: []string{"--open-mode=truncate"}}, []Directive{{"requeue", ""}, {"open-mode", "append"}, {"open-mode", "truncate"}}},
		{JobOptions{Output: "o"}, []Directive{{"output", "o"}}},
	} {
		got, err := tc.o.Directives()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.o, diff)
		}
	}
}

// Options are read in every spelling sbatch takes, abbreviations as
// getopt_long resolves them.
func TestReadOption(t *testing.T) {
	type read struct {
		Long  string
		Value string
		OK    bool
	}
	for _, tc := range []struct {
		raw  string
		want read
	}{
		{"--nodes=3", read{"nodes", "3", true}},
		{"--nodes 3", read{"nodes", "3", true}},
		{"#SBATCH --nodes=3", read{"nodes", "3", true}},
		{"-N3", read{"nodes", "3", true}},
		{"-N 3", read{"nodes", "3", true}},
		{"--job-n=x", read{"job-name", "x", true}},
		{"--tasks-per-node=2", read{"tasks-per-node", "2", true}},
		{"--ntasks=4", read{"ntasks", "4", true}}, // exact, though a prefix of ntasks-per-node
		{"--exclusive", read{"exclusive", "", true}},
		{"--nod=2", read{}},     // ambiguous: nodes, nodefile, nodelist
		{"--no-such=1", read{}}, // not sbatch's
		{"-Z", read{}},          // not sbatch's
		{"nodes=3", read{}},     // not an option
		{"--", read{}},          // no name
		{"--comment -N2", read{"comment", "-N2", true}},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			o, v, ok := ReadOption(tc.raw)
			if diff := cmp.Diff(tc.want, read{o.Long, v, ok}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckManaged(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want string // "": not managed
	}{
		{"--nodes=3", "-N/--nodes"}, {"-N3", "-N/--nodes"}, {"--ntasks 7", "-n/--ntasks"}, {"-n 7", "-n/--ntasks"},
		{"--ntasks-per-node=2", "--ntasks-per-node"}, {"--tasks-per-node=2", "--ntasks-per-node"},
		{"-c2", "-c/--cpus-per-task"}, {"--cpus-per-t=2", "-c/--cpus-per-task"}, {"-a1-3", "-a/--array"},
		{"--array=1-3", "-a/--array"}, {"-o out", "-o/--output"}, {"--output=o", "-o/--output"},
		{"-eerr", "-e/--error"}, {"--error=e", "-e/--error"}, {"-Jx", "-J/--job-name"}, {"--job-name=x", "-J/--job-name"},
		{"--time=10", ""}, {"--mail-type=END", ""}, {"--exclusive", ""}, {"--chdir=/tmp", ""}, {"--nod=2", ""},
		{"--comment=--nodes=3", ""},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			got := ""
			if err := CheckManaged(tc.raw); err != nil {
				got = err.(*ManagedOptionError).Flag
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("flag to use (-want +got):\n%s", diff)
			}
		})
	}
}
