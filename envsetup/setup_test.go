package envsetup

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Shell writes a script with spaces in its arguments quoted, as bash would
// read them back.
func TestSetupShell(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup Setup
		want  string
	}{
		{"nothing", Setup{}, ""},
		{"scripts", Setup{Scripts: []Script{{Path: "/opt/intel/oneapi/setvars.sh", Args: []string{"--force"}}, {Path: "/a b/vars.sh"}}},
			"source /opt/intel/oneapi/setvars.sh --force\nsource '/a b/vars.sh'\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.setup.Shell()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Shell (-want +got):\n%s", diff)
			}
			if tc.setup.Empty() != (tc.want == "") {
				t.Errorf("Empty() = %v", tc.setup.Empty())
			}
		})
	}
	wheels, err := Setup{Wheels: "/opt/venv"}.Shell()
	if err != nil || !strings.Contains(wheels, "/opt/venv") {
		t.Errorf("with wheels: %q, %v: want the prefix named", wheels, err)
	}
}

// WriteShell and WriteJSON: unsets first, exports in name order, values
// quoted; JSON with both keys even when empty.
func TestChangesWrite(t *testing.T) {
	ch := Changes{Set: map[string]string{"B": "two words", "A": "1"}, Unset: []string{"OLD"}}
	var sh, js, empty bytes.Buffer
	if err := ch.WriteShell(&sh); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("unset OLD\nexport A=1\nexport B='two words'\n", sh.String()); diff != "" {
		t.Errorf("WriteShell (-want +got):\n%s", diff)
	}
	if err := ch.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"set":{"A":"1","B":"two words"},"unset":["OLD"]}`+"\n", js.String()); diff != "" {
		t.Errorf("WriteJSON (-want +got):\n%s", diff)
	}
	if err := (Changes{}).WriteJSON(&empty); err != nil || empty.String() != `{"set":{},"unset":[]}`+"\n" {
		t.Errorf("WriteJSON of nothing = %q, %v", empty.String(), err)
	}
}
