package envsetup

import (
	"errors"
	"testing"
)

func TestNewToken(t *testing.T) {
	a, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewToken()
	if len(a) != 64 || a == b {
		t.Errorf("tokens %q and %q: want two different 64-digit hex strings", a, b)
	}
}

func TestLaunchToken(t *testing.T) {
	gen := func() (string, error) { return "new", nil }
	for _, tc := range []struct {
		name    string
		environ []string
		want    string
	}{
		{"none: new", []string{"PATH=/bin"}, "new"},
		{"empty: new", []string{"BATCHKIT_JOB_TOKEN="}, "new"},
		{"the user's", []string{"BATCHKIT_JOB_TOKEN=mine"}, "mine"},
		{"the last of duplicates", []string{"BATCHKIT_JOB_TOKEN=a", "BATCHKIT_JOB_TOKEN=b"}, "b"},
	} {
		got, err := LaunchToken(tc.environ, gen)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := LaunchToken(nil, func() (string, error) { return "", errors.New("no entropy") }); err == nil {
		t.Error("newToken's error lost")
	}
}
