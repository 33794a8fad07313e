package trainer

import (
	"testing"
	"time"
)

// The defaults reach at least 95 % test accuracy on 1, 2 and 4 ranks.
func TestAccuracyDefaults(t *testing.T) {
	train, test := digitsSplit(t)
	for _, n := range []int{1, 2, 4} {
		begin := time.Now()
		res, errs := trainWorld(n, train, test, func(int) Config { return defaults() })
		for r, err := range errs {
			if err != nil {
				t.Fatalf("%d ranks, rank %d: %v", n, r, err)
			}
		}
		t.Logf("%d ranks: test accuracy %.4f, loss %.4f, %d steps, %v", n, res[0].TestAcc, res[0].TestLoss, res[0].Steps, time.Since(begin).Round(time.Millisecond))
		if res[0].TestAcc < 0.95 {
			t.Errorf("%d ranks: test accuracy %.4f, want >= 0.95", n, res[0].TestAcc)
		}
		for r := 1; r < n; r++ {
			if WeightsSHA256(res[r].Params) != WeightsSHA256(res[0].Params) {
				t.Errorf("%d ranks: rank %d's weights differ from rank 0's", n, r)
			}
		}
	}
}
