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
		JobName: "mine", Time: "60", Nodes: "2-4",
		SiteExtra: []string{"--time=7", "--job-name=site"},
		Extra:     []string{"--mail-type=END"},
	}.Directives()
	if err != nil {
		t.Fatal(err)
	}
	want := []Directive{{"time", "7"}, {"job-name", "site"}, {"job-name", "mine"}, {"nodes", "2-4"}, {"time", "60"}, {"mail-type", "END"}}
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
