package job

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A run resumed from a checkpoint with 2 epochs done keeps those epochs'
// metrics lines: the killed run's later ones come again (epoch 3 too when
// its checkpoint came before the epoch's line), and a line the kill cut
// short goes, and so does another run's line.
func TestMetricsUpTo(t *testing.T) {
	in := `{"run":"r1","epoch":1,"step":45}
{"run":"r2","epoch":1,"step":45}
{"run":"r1","epoch":2,"step":90}
{"run":"r1","epoch":3,"step":135}
{"run":"r1","epoch":4,"st`
	for _, tc := range []struct {
		name   string
		epochs int
		want   string
	}{
		{"two epochs done", 2, "{\"run\":\"r1\",\"epoch\":1,\"step\":45}\n{\"run\":\"r1\",\"epoch\":2,\"step\":90}\n"},
		{"three epochs done", 3, "{\"run\":\"r1\",\"epoch\":1,\"step\":45}\n{\"run\":\"r1\",\"epoch\":2,\"step\":90}\n{\"run\":\"r1\",\"epoch\":3,\"step\":135}\n"},
		{"in the first epoch", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, string(metricsUpTo([]byte(in), "r1", tc.epochs))); diff != "" {
				t.Errorf("metricsUpTo(%d) (-want +got):\n%s", tc.epochs, diff)
			}
		})
	}
}
