package detect

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/topology"
)

// TestEveryLauncherHasALayer: detection has one row per launcher of
// topology.Launchers, and no row for a launcher without a traits row there
// (whose consumers would take it for an unknown one).
func TestEveryLauncherHasALayer(t *testing.T) {
	var rows []topology.Launcher
	for _, l := range layers {
		rows = append(rows, l.launcher)
	}
	want := slices.Clone(topology.Launchers)
	slices.Sort(want)
	slices.Sort(rows)
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("layers' launchers (-topology.Launchers +layers):\n%s", diff)
	}
}
