package topology

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTraits pins every launcher's row, so that a decision changes only on
// purpose (the rows say why each is what it is): whether batchkit exec
// watches its ranks (launch/failfast), which MPI library can join it
// (trainer/collective/mpi), and how a rank is pinned (envsetup). A name
// that is no launcher gets the zero Traits, which assumes nothing of it.
func TestTraits(t *testing.T) {
	mpiPins := Pin{BindsRanks: true}
	tests := []struct {
		l    Launcher
		want Traits
	}{
		{Single, Traits{}},
		{Torchrun, Traits{}},
		{Slurm, Traits{LeavesRanksRunning: true}},
		{SlurmBatch, Traits{}},
		{OpenMPI, Traits{PMI: OffersORTE, Pin: mpiPins}},
		{Hydra, Traits{LeavesRanksRunning: true, PMI: OffersPMI2,
			Pin: Pin{BindsRanks: true, AppliesPinDomain: true, HydraLocalRanks: true}}},
		{MVAPICH, Traits{LeavesRanksRunning: true, PMI: OffersPMI2, Pin: mpiPins}},
		{PMIx, Traits{PMI: OffersPMIx, Pin: mpiPins}},
		{PALS, Traits{PMI: OffersPMI2, Pin: mpiPins}},
		{"flux", Traits{}},
		{"", Traits{}},
	}
	var pinned []Launcher
	for _, tt := range tests {
		t.Run(string(tt.l), func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.l.Traits()); diff != "" {
				t.Errorf("Traits (-want +got):\n%s", diff)
			}
		})
		if slices.Contains(Launchers, tt.l) {
			pinned = append(pinned, tt.l)
		}
	}
	if diff := cmp.Diff(Launchers, pinned); diff != "" {
		t.Errorf("launchers pinned here (-Launchers +pinned):\n%s", diff)
	}
}
