package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/envsetup"
)

// envsetup --format json keeps the bytes a script exported: each byte that
// is not UTF-8 as \udcXX, one line (issue 30, item 15: two values that
// differed in such a byte printed the same U+FFFD).
func TestEnvsetupJSONKeepsBytes(t *testing.T) {
	script := filepath.Join(t.TempDir(), "bytes.sh")
	if err := os.WriteFile(script, []byte("export BK_A=$'a\\xffb' BK_B=$'a\\xfeb'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"batchkit", "envsetup", "--source", script, "--format", "json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.Bytes())
	}
	if want := `{"set":{"BK_A":"a\udcffb","BK_B":"a\udcfeb"},"unset":[]}` + "\n"; stdout.String() != want {
		t.Errorf("envsetup printed %s, want %s", stdout.Bytes(), want)
	}
	var got envsetup.Changes
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := envsetup.Changes{Set: map[string]string{"BK_A": "a\xffb", "BK_B": "a\xfeb"}, Unset: []string{}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}
