package trainer

import (
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBucketPlan(t *testing.T) {
	// The compute-bound model of bench-train: 64 → 1024 → 1024 → 10.
	// Layer 0: 66,560 parameters, layer 1: 1,049,600, layer 2: 10,250.
	big := MLP{Sizes: []int{64, 1024, 1024, 10}}
	const e = 6
	l0, l1, l2 := 66560, 1049600, 10250
	end := e + l0 + l1 + l2
	for _, tc := range []struct {
		name     string
		m        MLP
		capBytes int
		want     []bucket
	}{
		{"off: one bucket after backward", big, 0, []bucket{{0, end, 0}}},
		{"1 byte: one bucket per layer", big, 1, []bucket{{e + l0 + l1, end, 2}, {e + l0, e + l0 + l1, 1}, {0, e + l0, 0}}},
		{"1 MiB: the small last layer joins the next (DDP's rule)", big, 1 << 20, []bucket{{e + l0, end, 1}, {0, e + l0, 0}}},
		{"25 MiB: everything in the last bucket", big, 25 << 20, []bucket{{0, end, 0}}},
		{"no hidden layer: one bucket whatever the size", MLP{Sizes: []int{64, 10}}, 1, []bucket{{0, e + 650, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, bucketPlan(tc.m, e, tc.capBytes), cmp.AllowUnexported(bucket{})); diff != "" {
				t.Errorf("bucketPlan (-want +got):\n%s", diff)
			}
		})
	}
}

// recordComm is a world of one that keeps a copy of every buffer it is
// given to average, as it was when the call began.
type recordComm struct {
	Comm
	mu    sync.Mutex
	calls [][]float32
}

func (c *recordComm) AllreduceSum(buf []float32) error {
	c.mu.Lock()
	c.calls = append(c.calls, slices.Clone(buf))
	c.mu.Unlock()
	return nil
}

// Every bucket is sent with its final values: a hook called before its
// layer's gradient is complete would send a partial one.
func TestBucketsSendFinalGradients(t *testing.T) {
	m := MLP{Sizes: []int{5, 7, 6, 3}}
	p := make([]float32, m.NumParams())
	m.InitParams(p, 1)
	x := make([]float32, 4*5)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	y := []int32{0, 2, 1, 2}
	for _, capBytes := range []int{0, 1, 100} {
		c := &recordComm{Comm: NewLocalWorld(1).Comms[0]}
		buf := make([]float32, nExtra+m.NumParams())
		plan := bucketPlan(m, nExtra, capBytes)
		ov := newOverlap(c, buf, plan)
		var ws Workspace
		m.LossGradEach(p, buf[nExtra:], x, y, &ws, ov.ready)
		for i := range nExtra {
			buf[i] = float32(i + 1)
		}
		if err := ov.finish(); err != nil {
			t.Fatal(err)
		}
		ov.stop()
		var want [][]float32
		for _, b := range plan {
			want = append(want, buf[b.lo:b.hi])
		}
		if diff := cmp.Diff(want, c.calls); diff != "" {
			t.Errorf("bucket size %d: the buffers sent (-final +sent):\n%s", capBytes, diff)
		}
	}
}

// Bucketed and unbucketed steps end with the same weights in an in-process
// world of 2 and 3 ranks (it sums in rank order whatever the split).
func TestBucketedEqualsUnbucketed(t *testing.T) {
	train, test := digitsSplit(t)
	for _, n := range []int{2, 3} {
		sha := map[int]string{}
		// 1 byte: a bucket per layer; 8 KiB: layers 2 and 1 (9.6 KB), then
		// layer 0 with the extras.
		for _, capBytes := range []int{0, 1, 8 << 10} {
			res, errs := trainWorld(n, train, test, func(int) Config {
				cfg := defaults()
				cfg.Hidden, cfg.Epochs, cfg.BucketBytes = []int{64, 32}, 2, capBytes
				return cfg
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("%d ranks, bucket %d B, rank %d: %v", n, capBytes, r, err)
				}
			}
			sha[capBytes] = WeightsSHA256(res[0].Params)
			if res[0].Comm.Total <= 0 || res[0].Comm.Exposed <= 0 {
				t.Errorf("%d ranks, bucket %d B: comm stats %+v, want both > 0", n, capBytes, res[0].Comm)
			}
		}
		if sha[1] != sha[0] || sha[8<<10] != sha[0] {
			t.Errorf("%d ranks: weights %v by bucket size, want one", n, sha)
		}
	}
}

// idleRecordComm tells apart the two ways of averaging.
type idleRecordComm struct {
	Comm
	mu  sync.Mutex
	how []string
}

func (c *idleRecordComm) AllreduceSum(buf []float32) error { return c.record("blocking") }
func (c *idleRecordComm) AllreduceSumIdle(buf []float32) error {
	return c.record("idle")
}
func (c *idleRecordComm) record(how string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.how = append(c.how, how)
	return nil
}

// The buckets' calls made beside the backward pass wait idle
// (AllreduceSumIdle); those sent once it is done (the last bucket, and the
// one call of a step without buckets) are the blocking ones, which have
// the lowest latency.
func TestBucketsWaitIdle(t *testing.T) {
	m := MLP{Sizes: []int{5, 7, 6, 3}}
	p := make([]float32, m.NumParams())
	m.InitParams(p, 1)
	x := make([]float32, 4*5)
	y := []int32{0, 2, 1, 2}
	for _, tc := range []struct {
		capBytes int
		want     []string
	}{
		{0, []string{"blocking"}},
		{1, []string{"idle", "idle", "blocking"}},
	} {
		c := &idleRecordComm{Comm: NewLocalWorld(1).Comms[0]}
		buf := make([]float32, nExtra+m.NumParams())
		ov := newOverlap(c, buf, bucketPlan(m, nExtra, tc.capBytes))
		var ws Workspace
		m.LossGradEach(p, buf[nExtra:], x, y, &ws, ov.ready)
		if err := ov.finish(); err != nil {
			t.Fatal(err)
		}
		ov.stop()
		if diff := cmp.Diff(tc.want, c.how); diff != "" {
			t.Errorf("bucket size %d: the calls (-want +got):\n%s", tc.capBytes, diff)
		}
	}
}

func TestBucketSizeRefused(t *testing.T) {
	cfg := defaults()
	cfg.BucketBytes = -1
	if err := cfg.Validate(); err != errBucketSize {
		t.Errorf("Validate: %v, want %v", err, errBucketSize)
	}
}
