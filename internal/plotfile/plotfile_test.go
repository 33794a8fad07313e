package plotfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.png")
	if err := os.WriteFile(old, []byte("png"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d.png"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		inputs     []string
		replace    bool
		want       string // "" = accepted
	}{
		{"new file", filepath.Join(dir, "new.svg"), nil, false, ""},
		{"upper-case extension", filepath.Join(dir, "new.PDF"), nil, false, ""},
		{"unknown format", filepath.Join(dir, "new.jpg"), nil, false, `"` + dir + `/new.jpg": want a file name ending in .png, .svg, .pdf`},
		{"exists", old, nil, false, `"` + old + `": file exists (use --force to replace it)`},
		{"exists, replace", old, nil, true, ""},
		{"an input, even with replace", old, []string{old}, true, `"` + old + `": it is the result file ` + old + `, which the plot would replace`},
		{"no directory", filepath.Join(dir, "none", "p.png"), nil, false, `"` + dir + `/none/p.png": no directory ` + dir + `/none`},
		{"a directory", filepath.Join(dir, "d.png"), nil, true, `"` + dir + `/d.png": is a directory, not a regular file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := Check(tc.path, tc.inputs, tc.replace); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Check(%q) = %q\n want %q", tc.path, got, tc.want)
			}
		})
	}
}
