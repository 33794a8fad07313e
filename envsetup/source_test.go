package envsetup

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDiff(t *testing.T) {
	for _, c := range []struct {
		name          string
		before, after map[string]string
		want          Changes
	}{
		{"nothing", map[string]string{"A": "1"}, map[string]string{"A": "1"}, Changes{Set: map[string]string{}, Unset: []string{}}},
		{"added, changed, removed",
			map[string]string{"KEEP": "k", "CHANGE": "old", "GONE": "g", "ALSO_GONE": ""},
			map[string]string{"KEEP": "k", "CHANGE": "new", "NEW": "", "MULTI": "a\nb"},
			Changes{Set: map[string]string{"CHANGE": "new", "NEW": "", "MULTI": "a\nb"}, Unset: []string{"ALSO_GONE", "GONE"}}},
		{"bash's own variables are not changes",
			map[string]string{"PWD": "/a", "SHLVL": "1", "OLDPWD": "/"},
			map[string]string{"PWD": "/b", "SHLVL": "2", "_": "/usr/bin/env", "BASH_FUNC_module%%": "() { :; }", "BASH_ENV": "x", "__batchkit_i": "3"},
			Changes{Set: map[string]string{}, Unset: []string{}}},
		{"names no shell can export",
			map[string]string{"a-b": "1"},
			map[string]string{"9x": "1", "x.y": "2"},
			Changes{Set: map[string]string{}, Unset: []string{}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, Diff(c.before, c.after)); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApply(t *testing.T) {
	for _, c := range []struct {
		name    string
		environ []string
		c       Changes
		want    []string
	}{
		{"nothing", []string{"A=1", "B=2"}, Changes{}, []string{"A=1", "B=2"}},
		{"in place, new ones sorted at the end",
			[]string{"PATH=/usr/bin", "HOME=/root", "GONE=x"},
			Changes{Set: map[string]string{"PATH": "/opt/bin:/usr/bin", "Z": "z", "A": "a\nb"}, Unset: []string{"GONE"}},
			[]string{"PATH=/opt/bin:/usr/bin", "HOME=/root", "A=a\nb", "Z=z"}},
		{"duplicates: one left", []string{"A=1", "B=2", "A=3"}, Changes{Set: map[string]string{"A": "new"}}, []string{"A=new", "B=2"}},
		{"unset what is not there", []string{"A=1"}, Changes{Unset: []string{"B"}}, []string{"A=1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, Apply(c.environ, c.c)); diff != "" {
				t.Errorf("Apply (-want +got):\n%s", diff)
			}
		})
	}
}

// Apply(before, Diff(before, after)) is after, but for the variables Diff
// leaves out.
func TestApplyDiff(t *testing.T) {
	before := []string{"A=1", "B=2", "C=3", "PWD=/x"}
	after := map[string]string{"A": "1", "B": "two", "D": "4", "PWD": "/y"}
	got := Environ(Apply(before, Diff(Environ(before), after)))
	want := map[string]string{"A": "1", "B": "two", "D": "4", "PWD": "/x"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestWithVars(t *testing.T) {
	environ := []string{"USERS=mine", "EMPTY=", "PATH=/usr/bin", "SCRIPT_AND_USER=u"}
	sourced := Changes{
		Set:   map[string]string{"PATH": "/opt/bin:/usr/bin", "FROM_SCRIPT": "s", "SCRIPT_AND_PROFILE": "s", "SCRIPT_AND_USER": "s"},
		Unset: []string{"EMPTY", "REMOVED"},
	}
	vars := map[string]string{
		"USERS":              "profile's", // the user exported it: the user's wins
		"EMPTY":              "profile's", // set though empty: still the user's, even though a script unset it
		"SCRIPT_AND_PROFILE": "p",         // the profile's over the script's
		"SCRIPT_AND_USER":    "p",         // the user's over both
		"NEW":                "n",
	}
	want := Changes{
		Set:   map[string]string{"PATH": "/opt/bin:/usr/bin", "FROM_SCRIPT": "s", "SCRIPT_AND_PROFILE": "p", "NEW": "n"},
		Unset: []string{"REMOVED"},
	}
	got := WithVars(environ, sourced, vars)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WithVars (-want +got):\n%s", diff)
	}
	final := Environ(Apply(environ, got))
	for k, v := range map[string]string{"USERS": "mine", "EMPTY": "", "SCRIPT_AND_USER": "u", "NEW": "n"} {
		if final[k] != v {
			t.Errorf("%s = %q after Apply, want %q", k, final[k], v)
		}
	}
}

func TestDedupeLists(t *testing.T) {
	before := map[string]string{"PATH": "/opt/bin:/usr/bin", "LD_LIBRARY_PATH": "/l", "UNCHANGED_PATH": "/a:/a", "OTHER": "x:x"}
	after := map[string]string{
		"PATH":            "/opt/bin:/opt/bin:/usr/bin",
		"LD_LIBRARY_PATH": "/c:/l:/c::/l:",
		"UNCHANGED_PATH":  "/a:/a",
		"OTHER":           "y:y",
		"NEWPATH":         "/n:/n",
	}
	want := map[string]string{
		"PATH":            "/opt/bin:/usr/bin",
		"LD_LIBRARY_PATH": "/c:/l:",
		"UNCHANGED_PATH":  "/a:/a", // not the scripts': left as the user had it
		"OTHER":           "y:y",   // not a path list
		"NEWPATH":         "/n",
	}
	if diff := cmp.Diff(want, DedupeLists(before, after)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseDump(t *testing.T) {
	got := ParseDump([]byte("A=1\x00B=x=y\x00C=line\nnext\x00junk\x00=v\x00"))
	want := map[string]string{"A": "1", "B": "x=y", "C": "line\nnext"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A value a script set comes back whole through JSON, whatever its bytes:
// each byte of invalid UTF-8 as \udcXX, not encoding/json's U+FFFD, which
// made "a\xffb" and "a\xfeb" print the same (issue 30, item 15).
func TestChangesJSON(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   Changes
		want string
	}{
		{"empty, never null", Changes{}, `{"set":{},"unset":[]}`},
		{"plain", Changes{Set: map[string]string{"A": "1"}, Unset: []string{"B"}}, `{"set":{"A":"1"},"unset":["B"]}`},
		{"invalid UTF-8", Changes{Set: map[string]string{"A": "a\xffb", "B": "a\xfeb", "C": "日\n"}, Unset: []string{}},
			`{"set":{"A":"a\udcffb","B":"a\udcfeb","C":"日\n"},"unset":[]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("Marshal = %s, want %s", b, tt.want)
			}
			var back Changes
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			want := tt.in
			if want.Set == nil {
				want.Set = map[string]string{}
			}
			if want.Unset == nil {
				want.Unset = []string{}
			}
			if diff := cmp.Diff(want, back); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}
