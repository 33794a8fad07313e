package gemm

import "testing"

// TestVersion: a cgo library names its version; gonum has none.
func TestVersion(t *testing.T) {
	for _, l := range Built() {
		t.Logf("%s: %q", l.Name, l.Version)
		if (l.Name == Gonum) != (l.Version == "") {
			t.Errorf("%s: version %q", l.Name, l.Version)
		}
	}
}
