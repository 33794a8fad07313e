package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// simulate computes every rank's result of op by hand from the ranks'
// inputs (fillInputs): the reference the check patterns must agree with.
func simulate(op Collective, n, count int) [][]float32 {
	inputs := make([][]float32, n)
	for r := range n {
		k := count
		if op == Allgather {
			k = count / n
		}
		inputs[r] = make([]float32, k)
		fillInputs(op, r, n, inputs[r])
	}
	out := make([][]float32, n)
	sum := make([]float32, count)
	for r := range n {
		switch op {
		case Allreduce, ReduceScatter:
			if r == 0 {
				for _, in := range inputs { // float32 sums: exact only if the patterns are
					for i, v := range in {
						sum[i] += v
					}
				}
			}
			res := sum
			if op == ReduceScatter {
				k := count / n
				res = sum[r*k : (r+1)*k]
			}
			out[r] = append([]float32(nil), res...)
		case Allgather:
			for _, in := range inputs {
				out[r] = append(out[r], in...)
			}
		case Broadcast:
			out[r] = append([]float32(nil), inputs[0]...)
		}
	}
	return out
}

func TestCheckPatterns(t *testing.T) {
	for _, op := range Collectives {
		for _, n := range []int{1, 2, 3, 7, 1448, 1449} { // 1449: n(n+1)/2 > 2^20, unit weights
			count := 2 * n
			if n < 100 {
				count = 1 << 21 // past the patterns' periods
				count -= count % n
			}
			results := simulate(op, n, count)
			for r, res := range results {
				if i, got, want := firstWrong(op, r, n, res); i >= 0 {
					t.Fatalf("%s, %d ranks: rank %d's correct result fails the check at %d: %v, want %v", op, n, r, i, got, want)
				}
			}
			// A corrupted element is found, and so is a misplaced block.
			last := results[n-1]
			last[len(last)/2] += 1
			if i, _, _ := firstWrong(op, n-1, n, last); i != len(last)/2 {
				t.Errorf("%s, %d ranks: corrupted element %d found at %d", op, n, len(last)/2, i)
			}
			if n > 1 && op != ReduceScatter {
				k := len(results[0]) / n
				res := results[0]
				copy(res[:k], res[k:2*k])
				if i, _, _ := firstWrong(op, 0, n, res); i != 0 {
					t.Errorf("%s, %d ranks: block 1 copied over block 0 found at %d, want 0", op, n, i)
				}
			}
		}
	}
}

func TestCheckErrorMessage(t *testing.T) {
	got := []string{
		(&CheckError{Op: Allreduce, Bytes: 1 << 20, Rank: 1, Index: 123, Got: 3, Want: 4}).Error(),
		(&CheckError{Op: Broadcast, Bytes: 8, Rank: -1, Index: -1}).Error(),
	}
	want := []string{
		"allreduce 1 MiB (1048576 bytes): wrong result on rank 1: element 123 is 3, want 4",
		"broadcast 8 B (8 bytes): wrong result: the ranks' results are not bit-identical",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if strings.Contains(got[0], "\n") {
		t.Error("multi-line error")
	}
}
