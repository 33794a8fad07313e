package trainer

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPermutation(t *testing.T) {
	p := Permutation(7, 3, 100)
	if !slices.Equal(p, Permutation(7, 3, 100)) {
		t.Error("not a pure function of seed and epoch")
	}
	if slices.Equal(p, Permutation(7, 4, 100)) || slices.Equal(p, Permutation(8, 3, 100)) {
		t.Error("another epoch or seed gives the same order")
	}
	s := slices.Sorted(slices.Values(p))
	for i, v := range s {
		if v != i {
			t.Fatalf("not a permutation of 0..99: %v", s)
		}
	}
}

// torch.utils.data.DistributedSampler(range(10), num_replicas=4,
// shuffle=False) gives [0 4 8 2] [1 5 9 3] [2 6 0] ... padded by wrapping.
func TestShard(t *testing.T) {
	perm := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	var got [][]int
	for r := range 4 {
		got = append(got, Shard(perm, r, 4))
	}
	want := [][]int{{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if n := StepsPerEpoch(10, 4, 2); n != 2 {
		t.Errorf("StepsPerEpoch(10, 4, 2) = %d, want 2", n)
	}
}
