package topology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Each launcher has one row, and a name that is no launcher gets the zero
// Traits, which assumes nothing of it.
func TestTraits(t *testing.T) {
	seen := map[Launcher]bool{}
	for _, l := range Launchers {
		if seen[l] {
			t.Errorf("%s has two rows", l)
		}
		seen[l] = true
	}
	tests := []struct {
		name string
		l    Launcher
		want Traits
	}{
		{"unknown", "flux", Traits{}},
		{"empty", "", Traits{}},
		{"srun lets the others run on", Slurm, Traits{LeavesRanksRunning: true}},
		{"hydra", Hydra, Traits{LeavesRanksRunning: true, PMI: OffersPMI2,
			Pin: Pin{BindsRanks: true, AppliesPinDomain: true, HydraLocalRanks: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.l.Traits()); diff != "" {
				t.Errorf("Traits (-want +got):\n%s", diff)
			}
		})
	}
}
