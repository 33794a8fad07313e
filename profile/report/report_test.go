package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/profile"
)

// Check: a good profile is ok (with the note its templates leave), a bad
// one lists its problems; a base's problems are said once, for the first
// profile that extends it, and the summary counts them once.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.toml", "[mpi]\nflavor = \"mpich\"\n")
	base := write("base.toml", "[slurm]\nnodes = \"two\"\n")
	a := write("a.toml", "extends = \"./base.toml\"\n")
	b := write("b.toml", "extends = \"./base.toml\"\n")
	note := func(r *profile.Resolved) (string, error) {
		if r.Path == good {
			return "templates t is not on this machine: not checked", nil
		}
		return "", nil
	}
	rows := Check(&profile.Loader{Dirs: []string{dir}}, []string{good, a, b}, note)
	var out, errw bytes.Buffer
	WriteCheck(&out, &errw, rows)
	if diff := cmp.Diff(good+": ok (templates t is not on this machine: not checked)\n", out.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if rows[1].OK || rows[2].OK || len(rows[1].Problems) == 0 || !cmp.Equal(rows[1].Problems, rows[2].Problems) {
		t.Errorf("rows %+v: want a and b not ok, each with the base's problems", rows)
	}
	if want := b + ": not ok: its problems are above\n"; !bytes.HasSuffix(errw.Bytes(), []byte(want)) || bytes.Count(errw.Bytes(), []byte(base)) != 1 {
		t.Errorf("stderr %q: want the base's problem once, then %q", errw.String(), want)
	}
	if err := CheckSummary(rows); err == nil || err.Error() != "1 problem in 2 of 3 profiles" {
		t.Errorf("CheckSummary = %v, want 1 problem in 2 of 3 profiles", err)
	}
	if err := CheckSummary(rows[:1]); err != nil {
		t.Errorf("CheckSummary(good) = %v, want nil", err)
	}
}

// List: an invalid profile's row has its problems, and its description in
// the table says how many and how to see them.
func TestList(t *testing.T) {
	rows := List([]profile.Entry{
		{Name: "site", Path: "/p/site.toml", Description: "our site"},
		{Name: "site", Path: "/q/site.toml", Shadowed: true, Err: &profile.Problem{File: "/q/site.toml", Line: 1, Col: 1, Msg: "bad"}},
	})
	if diff := cmp.Diff([]string{}, rows[0].Problems); diff != "" {
		t.Errorf("valid profile's problems (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	if err := WriteList(&out, rows); err != nil {
		t.Fatal(err)
	}
	want := "NAME  SOURCE                   DESCRIPTION\n" +
		"site  /p/site.toml             our site\n" +
		"site  /q/site.toml (shadowed)  (invalid: 1 problem; batchkit profile check /q/site.toml)\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("WriteList (-want +got):\n%s", diff)
	}
}
